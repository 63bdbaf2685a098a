from __future__ import annotations

from typing import Any

import pytest

from ragwright.core.documents import (
    MAX_DOCUMENT_CHARS,
    MAX_PARAGRAPH_CHARS,
    content_revision,
    ensure_unique_ids,
    validate_document,
)
from ragwright.errors import DocumentError
from ragwright.types import SourceSection

SECTION = SourceSection("s", "Heading", ("A paragraph.",))


def valid(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "document_id": "doc",
        "title": "Title",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [SECTION],
    }
    fields.update(changes)
    return fields


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"document_id": "  "}, "document_id", "blank"),
        ({"document_id": None}, "document_id", "string"),
        ({"title": ""}, "title", "blank"),
        ({"document_type": "Runbook"}, "document_type", "exact spelling"),
        ({"document_type": "faq"}, "document_type", "not one of"),
        ({"publication_state": "Published"}, "publication_state", "exact spelling"),
        ({"publication_state": "archived"}, "publication_state", "not one of"),
        ({"sections": []}, "sections", "at least one section"),
        ({"sections": [SECTION, SECTION]}, "sections[1].section_id", "duplicate section id"),
        ({"sections": [SourceSection("s", "H", ())]}, "sections[0].paragraphs", "no paragraphs"),
        (
            {"sections": [SourceSection("s", "H", ("ok", " "))]},
            "sections[0].paragraphs[1]",
            "blank",
        ),
        ({"sections": [SourceSection("s", "", ("ok",))]}, "sections[0].heading", "blank"),
        ({"tenant": ""}, "tenant", "blank"),
        (
            {"sections": [SourceSection("s", "H", ("a", "b"), (1,))]},
            "sections[0].pages",
            "one page number",
        ),
        (
            {"sections": [SourceSection("s", "H", ("a", "b"), (2, 1))]},
            "sections[0].pages",
            "never decreasing",
        ),
        ({"sections": [SourceSection("s", "H", ("a",), (0,))]}, "sections[0].pages", "1 or more"),
        (
            {"sections": [SourceSection("s", "H", ("x" * 5_000_000,))]},
            "sections[0].paragraphs[0]",
            "has 5,000,000 characters, at most 100,000",
        ),
        (
            {"sections": [SourceSection("s", "H", ("y" * 100_000,) * 10)]},
            "sections",
            "at most 1,000,000 are allowed: split it into several documents",
        ),
    ],
)
def test_validation_names_document_field_and_rule(
    changes: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        validate_document(**valid(**changes))
    assert caught.value.field == field
    assert rule in caught.value.rule
    assert field in str(caught.value)


def test_paragraphs_and_documents_at_the_size_caps_are_accepted() -> None:
    at_cap = SourceSection("s", "H", ("y" * MAX_PARAGRAPH_CHARS,) * 9)
    document = validate_document(**valid(title="T" * 10, sections=[at_cap]))
    assert sum(map(len, document.sections[0].paragraphs)) <= MAX_DOCUMENT_CHARS


def test_custom_document_types_are_respected() -> None:
    doc = validate_document(**valid(document_type="faq"), document_types=("faq",))
    assert doc.document_type == "faq"


def test_revision_defaults_to_content_hash_and_ignores_metadata() -> None:
    published = validate_document(**valid())
    draft = validate_document(**valid(publication_state="draft", tenant="acme"))
    assert published.revision == draft.revision == content_revision("Title", [SECTION])
    edited = validate_document(**valid(sections=[SourceSection("s", "Heading", ("Changed.",))]))
    assert edited.revision != published.revision
    assert validate_document(**valid(revision="r7")).revision == "r7"


def test_duplicate_document_ids_in_one_run_are_rejected() -> None:
    a = validate_document(**valid(), source_uri="a.md")
    b = validate_document(**valid(), source_uri="b.md")
    with pytest.raises(DocumentError) as caught:
        ensure_unique_ids([a, b])
    assert caught.value.document_id == "doc"
    assert "a.md" in str(caught.value)


CONTROL_CHARACTERS = ["\n", "\r", "\x00", "\t", "\x1b", "\x7f", "\x85", "\u2028"]


@pytest.mark.parametrize("character", CONTROL_CHARACTERS)
@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("document_id", lambda c: {"document_id": f"a{c}b"}),
        ("tenant", lambda c: {"tenant": f"acme{c}"}),
        (
            "sections[0].section_id",
            lambda c: {"sections": [SourceSection(f"s{c}1", "Heading", ("A paragraph.",))]},
        ),
    ],
)
def test_ids_with_control_characters_are_rejected(character: str, field: str, changes: Any) -> None:
    with pytest.raises(DocumentError) as caught:
        validate_document(**valid(**changes(character)))
    assert caught.value.field == field
    assert "control characters" in caught.value.rule


def test_the_same_document_id_under_two_tenants_is_two_documents() -> None:
    acme = validate_document(**valid(tenant="acme"), source_uri="acme/doc.md")
    globex = validate_document(**valid(tenant="globex"), source_uri="globex/doc.md")
    untenanted = validate_document(**valid(), source_uri="doc.md")
    assert ensure_unique_ids([acme, globex, untenanted]) == [acme, globex, untenanted]
    with pytest.raises(DocumentError, match="tenant 'acme'"):
        ensure_unique_ids([acme, globex, acme])


def test_validation_keeps_the_content_hash_and_a_digest_hashes_no_content_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    from ragwright.core import documents
    from ragwright.core.points import source_digest
    from ragwright.testing.fakes import HASHING_PROFILE

    document = validate_document(**valid(revision="v7"))
    assert document.content_hash == content_revision("Title", [SECTION])
    calls: list[str] = []

    def counting(title: str, sections: Any) -> str:
        calls.append(title)
        return content_revision(title, sections)

    monkeypatch.setattr(documents, "content_revision", counting)
    digest = source_digest(
        document, chunking_version="c1", profile=HASHING_PROFILE, lexical_profile_id="bm25"
    )
    assert calls == []
    # A copy with other content carries no stale hash: its digest hashes the new content.
    changed = replace(document, sections=(SourceSection("s", "Heading", ("Another.",)),))
    assert changed.content_hash == ""
    other = source_digest(
        changed, chunking_version="c1", profile=HASHING_PROFILE, lexical_profile_id="bm25"
    )
    assert calls == ["Title"] and other != digest

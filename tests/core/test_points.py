from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from ragwright.core.chunking import build_chunks
from ragwright.core.documents import validate_document
from ragwright.core.points import LIVE, plan_document, read_payload, stored_point_id
from ragwright.errors import PayloadError
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import ChunkingPolicy, SourceSection


def plan(paragraphs: tuple[str, ...] = ("First paragraph.", "Second one."), **meta: Any):  # type: ignore[no-untyped-def]
    fields: dict[str, Any] = {
        "document_id": "doc",
        "title": "Title",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [SourceSection("s", "Heading", paragraphs)],
    }
    fields.update(meta)
    document = validate_document(**fields)
    return plan_document(
        document, build_chunks(document, ChunkingPolicy(max_words=4)), HASHING_PROFILE
    )


def test_stored_id_derives_from_chunk_identity_and_content() -> None:
    first = plan()
    point = first.points[0]
    assert point.stored_id == stored_point_id(point.chunk.point_id, point.payload["content_hash"])
    assert point.payload["chunk_point_id"] == str(point.chunk.point_id)
    edited = plan(("First paragraph changed.", "Second one."))
    assert edited.points[0].stored_id != point.stored_id
    assert edited.points[1].stored_id == first.points[1].stored_id


def test_metadata_change_keeps_stored_ids_but_changes_digest() -> None:
    published, draft = plan(), plan(publication_state="draft")
    assert [p.stored_id for p in published.points] == [p.stored_id for p in draft.points]
    assert published.digest != draft.digest
    assert draft.document_fields["publication_state"] == "draft"
    assert draft.document_fields["index_state"] == LIVE


def test_payload_round_trips_through_validation() -> None:
    point = plan(tenant="acme").points[0]
    payload = read_payload(point.stored_id, point.payload)
    assert payload.tenant == "acme"
    assert payload.text == point.chunk.text
    assert payload.positions == point.chunk.positions


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"document_id": None}, "document_id"),
        ({"publication_state": ["published"]}, "publication_state"),
        ({"chunking_version": 3}, "chunking_version"),
        ({"text": "   "}, "text"),
        ({"tenant": ""}, "tenant"),
        ({"positions": {"section_index": -1, "paragraphs": [0]}}, "positions.section_index"),
        ({"positions": {"section_index": 0, "paragraphs": []}}, "positions.paragraphs"),
        ({"positions": "0:1"}, "positions"),
        ({"pages": [3]}, "pages"),
        ({"pages": [4, 3]}, "pages"),
        ({"pages": [0, 1]}, "pages"),
        ({"pages": ["1", "2"]}, "pages"),
        ({"pages": "p. 3"}, "pages"),
    ],
)
def test_read_payload_fails_closed(change: dict[str, Any], field: str) -> None:
    point = plan().points[0]
    payload = {**point.payload, **change}
    payload = {k: v for k, v in payload.items() if v is not None}
    with pytest.raises(PayloadError) as caught:
        read_payload(point.stored_id, payload)
    assert caught.value.field == field


def test_missing_payload_fails_closed() -> None:
    with pytest.raises(PayloadError):
        read_payload(uuid.uuid4(), None)


def test_plans_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan().points[0].stored_id = uuid.uuid4()  # type: ignore[misc]


def test_paged_chunks_store_their_first_and_last_page_and_read_back() -> None:
    paged = plan(
        ("One two three.", "Four five six.", "Seven eight."),
        sections=[
            SourceSection("s", "H", ("One two three.", "Four five six.", "Seven eight."), (2, 3, 3))
        ],
    )
    assert [p.payload["pages"] for p in paged.points] == [[2, 2], [3, 3], [3, 3]]
    assert read_payload(paged.points[0].stored_id, paged.points[0].payload).pages == (2, 2)


def test_documents_without_pages_keep_the_payload_they_always_had() -> None:
    point = plan().points[0]
    assert "pages" not in point.payload
    assert read_payload(point.stored_id, point.payload).pages is None
    # The content revision of a section without pages is what it was before pages existed.
    assert plan().document.revision == (
        "sha256:"
        + __import__("hashlib")
        .sha256(b'["Title",[["s","Heading",["First paragraph.","Second one."]]]]')
        .hexdigest()
    )


def _reference_source_digest(
    document: Any, chunking_version: str, profile: Any, lexical_profile_id: str
) -> str:
    """The digest's definition: SHA-256 of the canonical JSON of its fields."""
    import hashlib
    import json

    from ragwright.core.documents import document_content_hash
    from ragwright.core.points import PLAN_REVISION

    canonical = json.dumps(
        {
            "plan_revision": PLAN_REVISION,
            "content": document_content_hash(document),
            "revision": document.revision,
            "title": document.title,
            "document_type": document.document_type,
            "publication_state": document.publication_state,
            "tenant": document.tenant,
            "source_uri": document.source_uri,
            "chunking_version": chunking_version,
            "embedding": [
                profile.profile_id,
                profile.artifact_digest,
                profile.document_format,
                profile.max_input_tokens,
            ],
            "lexical_profile": lexical_profile_id,
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("title", "tenant", "source_uri", "revision", "chunking_version"),
    [
        ("Drain a queue", None, None, "r1", "section-paragraphs-v1"),
        ('Quotes " and \\ back\\slash', "acme", "file:///runbooks/drain.md", "r 2", "c"),
        (
            "Überschrift — naïve 東京 🚀",
            "tenant\twith\ncontrol\x01",
            'https://x/ä?q=1&b="',
            "",
            "v\u2028",
        ),
        ("", "", "", "7", ""),
    ],
)
def test_source_digest_is_the_sha256_of_its_canonical_json(
    title: str, tenant: str | None, source_uri: str | None, revision: str, chunking_version: str
) -> None:
    from dataclasses import replace

    from ragwright.core.points import source_digest

    document = validate_document(
        document_id="doc-1",
        title=title or "T",
        document_type="runbook",
        publication_state="published",
        sections=[SourceSection("s1", "Heading", ("A paragraph.",))],
    )
    # Fields set past validation, so the digest sees values validation would refuse too.
    document = replace(
        document, title=title, tenant=tenant, source_uri=source_uri, revision=revision
    )
    for profile_format in (HASHING_PROFILE, replace(HASHING_PROFILE, document_format="é {title}")):
        expected = _reference_source_digest(document, chunking_version, profile_format, "bm25-ü")
        assert (
            source_digest(
                document,
                chunking_version=chunking_version,
                profile=profile_format,
                lexical_profile_id="bm25-ü",
            )
            == expected
        )

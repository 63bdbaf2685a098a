"""Which chunking version a query reads, and what its conditions left out (issue 24
item 7): an index built under one chunking version is queried under it; with several,
the result names the one read and the others; chunks the default types and states left
out are counted, never beyond what the caller may see."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ragwright.application import (
    AnswerRequest,
    Application,
    ChunkingOptions,
    EvidenceFilter,
    IngestRequest,
    SearchRequest,
)
from ragwright.application.left_out import Searched
from tests.application.components import fake_application
from tests.cli import copy_tree
from tests.conftest import SAMPLES

QUESTION = "Should I drain all queued work during shutdown?"
DEFAULT = "section-paragraphs-80w-overlap1-v1"
BLOCKS = "sentence-blocks-400w-overlap1-v1"
SENTENCE_BLOCKS = ChunkingOptions(policy="sentence-blocks", max_words=400)
OPERATOR = EvidenceFilter(also_visible_types=None, also_visible_states=None)
ACME_NOTE = """---
document_id: acme-note
document_type: note
publication_state: published
tenant: acme
---
# Acme drain note

## Drain

Acme workers drain queued work for at most ten seconds during shutdown.
"""


@pytest.fixture(scope="module")
def blocks_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples indexed under sentence-blocks only (as after ``ingest --policy
    sentence-blocks --max-words 400``)."""
    home = tmp_path_factory.mktemp("blocks")
    app, _ = fake_application(home)
    app.ingest(IngestRequest(sources=(SAMPLES,), chunking=SENTENCE_BLOCKS))
    return home


def _copy(home: Path, tmp_path: Path) -> Path:
    return copy_tree(home, tmp_path / "home")


def _answer(app: Application, request: AnswerRequest) -> dict[str, Any]:
    return asyncio.run(app.answer(request)).to_dict()


def test_a_query_reads_the_only_chunking_version_the_index_holds(blocks_home: Path) -> None:
    app, _ = fake_application(blocks_home)
    found = app.search(SearchRequest(QUESTION))
    assert (found.chunking_version, found.chunking_version_source) == (BLOCKS, "index")
    assert found.hits and {h.chunking_version for h in found.hits} == {BLOCKS}
    assert found.excluded_versions == {}
    answer = _answer(app, AnswerRequest(QUESTION, style="evidence"))
    assert answer["status"] == "evidence_only" and answer["quotes"]
    assert answer["options"]["chunking_version"] == answer["provenance"]["chunking_version"]
    assert (answer["options"]["chunking_version"], answer["chunking_version_source"]) == (
        BLOCKS,
        "index",
    )
    # status marks the version such a query reads.
    assert [v.chunking_version for v in app.status().versions if v.queried] == [BLOCKS]


def test_a_requested_version_or_a_chunking_setting_is_honoured(blocks_home: Path) -> None:
    app, _ = fake_application(blocks_home)
    asked = app.search(SearchRequest(QUESTION, evidence=EvidenceFilter(chunking_version=DEFAULT)))
    assert (asked.chunking_version, asked.chunking_version_source) == (DEFAULT, "request")
    assert not asked.hits and asked.excluded_versions[BLOCKS] > 0
    # A setting given, even at its default value, is the operator's choice.
    configured, _ = fake_application(blocks_home, max_words=80)
    found = configured.search(SearchRequest(QUESTION))
    assert (found.chunking_version, found.chunking_version_source) == (DEFAULT, "settings")
    assert not found.hits and found.excluded_versions == asked.excluded_versions


def test_with_several_versions_the_default_is_read_and_the_others_named(
    blocks_home: Path, tmp_path: Path
) -> None:
    app, _ = fake_application(_copy(blocks_home, tmp_path))
    app.ingest(IngestRequest(sources=(SAMPLES,), add_chunking_version=True))
    found = app.search(SearchRequest(QUESTION))
    assert (found.chunking_version, found.chunking_version_source) == (DEFAULT, "default")
    assert found.hits and set(found.excluded_versions) == {BLOCKS}
    answer = _answer(app, AnswerRequest(QUESTION, style="evidence"))
    assert answer["options"]["chunking_version"] == DEFAULT
    assert answer["chunking_version_source"] == "default"
    assert answer["excluded_versions"] == dict(found.excluded_versions)
    status = app.status()
    assert [v.chunking_version for v in status.versions if v.queried] == [DEFAULT]


def test_the_version_is_chosen_among_what_the_caller_may_see(
    blocks_home: Path, tmp_path: Path
) -> None:
    # acme's note alone is under the default version: acme's queries read that one,
    # an untenanted caller's still the version its own documents are under.
    corpus = tmp_path / "acme"
    corpus.mkdir()
    (corpus / "acme-note.md").write_text(ACME_NOTE, "utf-8")
    app, _ = fake_application(_copy(blocks_home, tmp_path))
    app.ingest(IngestRequest(sources=(corpus,), add_chunking_version=True, tenant="acme"))
    untenanted = app.search(SearchRequest(QUESTION, evidence=OPERATOR))
    assert (untenanted.chunking_version, untenanted.chunking_version_source) == (
        BLOCKS,
        "index",
    )
    assert untenanted.excluded_versions == {} and "note" in untenanted.excluded_types
    acme = app.search(SearchRequest(QUESTION, tenant="acme", evidence=OPERATOR))
    assert acme.chunking_version == DEFAULT and acme.chunking_version_source == "default"
    assert not acme.hits and acme.excluded_types == {"note": 1}
    # A note is not a runbook: only a caller who may see notes is told about it.
    runbooks = app.search(SearchRequest(QUESTION, tenant="acme"))
    assert runbooks.chunking_version == DEFAULT and runbooks.excluded_types == {}


def test_the_default_types_and_states_say_what_they_left_out(blocks_home: Path) -> None:
    app, _ = fake_application(blocks_home)
    operator = app.search(SearchRequest(QUESTION, evidence=OPERATOR))
    assert set(operator.excluded_types) == {"note"} and operator.excluded_types["note"] > 0
    assert set(operator.excluded_states) == {"draft"}
    # Counted only where the defaults applied: a named type or state is the caller's.
    named = app.search(
        SearchRequest(
            QUESTION,
            evidence=EvidenceFilter(
                types=("runbook",), also_visible_types=None, also_visible_states=None
            ),
        )
    )
    assert named.excluded_types == {} and named.excluded_states == operator.excluded_states
    answer = _answer(app, AnswerRequest(QUESTION, style="evidence", evidence=OPERATOR))
    assert answer["excluded_types"] == dict(operator.excluded_types)
    assert answer["excluded_states"] == dict(operator.excluded_states)


@pytest.mark.parametrize(
    ("evidence", "note"),
    [
        (
            EvidenceFilter(),
            "searched published runbook documents (the default eligibility); draft "
            "documents and documents of other types were not searched",
        ),
        (
            EvidenceFilter(types=("runbook", "note")),
            "searched published runbook and note documents (types as asked, state by "
            "default); draft documents and documents of other types were not searched",
        ),
        (
            EvidenceFilter(states=("draft",)),
            "searched draft runbook documents (type by default, state as asked); "
            "published documents and documents of other types were not searched",
        ),
        (
            EvidenceFilter(types=("note",), states=("published", "draft")),
            "searched published and draft note documents (as asked); documents of other "
            "types were not searched",
        ),
        (
            EvidenceFilter(types=("runbook", "note", "faq"), granted=True),
            "searched published runbook, note and faq documents (types from this key's "
            "grant, state by default); draft documents and documents of other types were "
            "not searched",
        ),
        (
            EvidenceFilter(types=("note",), states=("draft",), granted=True),
            "searched draft note documents (this key's grant); published documents and "
            "documents of other types were not searched",
        ),
        (
            EvidenceFilter(granted=True),  # a key made without types or states
            "searched published runbook documents (the default eligibility); draft "
            "documents and documents of other types were not searched",
        ),
    ],
)
def test_the_note_says_which_types_and_states_were_searched_and_why(
    evidence: EvidenceFilter, note: str
) -> None:
    assert Searched.of(evidence).note() == note


def test_a_result_says_what_it_searched_whatever_the_index_holds(blocks_home: Path) -> None:
    app, _ = fake_application(blocks_home)
    evidence = EvidenceFilter(types=("runbook", "note"))
    found = app.search(SearchRequest(QUESTION, evidence=evidence)).to_dict()
    answer = _answer(app, AnswerRequest(QUESTION, style="evidence", evidence=evidence))
    for data in (found, answer):
        assert data["searched"] == Searched.of(evidence).to_dict()
        assert data["searched"]["types"] == ["runbook", "note"]
        assert (data["excluded_types"], data["excluded_states"]) == ({}, {})


def test_left_out_counts_stay_within_the_callers_grant(blocks_home: Path) -> None:
    app, _ = fake_application(blocks_home)
    notes = app.search(SearchRequest(QUESTION, evidence=OPERATOR)).excluded_types["note"]

    def left_out(request: SearchRequest) -> tuple[dict[str, int], dict[str, int]]:
        found = app.search(request)
        return dict(found.excluded_types), dict(found.excluded_states)

    # By default a request may see nothing beyond its own filter (an API key's caller).
    assert left_out(SearchRequest(QUESTION)) == ({}, {})
    may_see_notes = EvidenceFilter(also_visible_types=("note",))
    assert left_out(SearchRequest(QUESTION, evidence=may_see_notes)) == ({"note": notes}, {})
    # The allowlist bounds the counts as it bounds the hits.
    assert left_out(
        SearchRequest(QUESTION, evidence=may_see_notes, allowed_documents=("worker-shutdown",))
    ) == ({}, {})
    one_note = left_out(
        SearchRequest(
            QUESTION,
            evidence=may_see_notes,
            allowed_documents=("worker-shutdown", "queue-capacity-note"),
        )
    )
    assert 0 < one_note[0]["note"] < notes
    assert left_out(SearchRequest(QUESTION, evidence=OPERATOR, allowed_documents=())) == ({}, {})


def test_a_chunking_setting_counts_as_given_from_the_environment_or_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ragwright.settings import load_settings

    assert not load_settings().chunking_configured
    # serve's own overrides leave the chunking settings unset.
    assert not load_settings().with_overrides(chat_keep_warm=0).chunking_configured
    monkeypatch.setenv("RAGWRIGHT_OVERLAP", "true")
    assert load_settings().with_overrides(chat_keep_warm=0).chunking_configured
    monkeypatch.delenv("RAGWRIGHT_OVERLAP")
    (tmp_path / "ragwright.toml").write_text('chunking = "section-paragraphs"\n', "utf-8")
    assert load_settings().chunking_configured

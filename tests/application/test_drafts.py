"""Previous drafts (issue 12): while the model is down, an earlier answer to the same
question is shown, labelled with its age, only when its inputs still match (cited
revisions, assembly policy, instructions version, tenant), within the max age; never
across tenants; purged when a cited document changes.

The application cases run ``Application.answer`` on the real index with a scripted model
whose first call answers and whose later calls fail transiently; the store cases run the
same conformance checks on SQLite and on PostgreSQL (a fresh schema per test)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ragwright.adapters.drafts import SqliteDraftStore
from ragwright.adapters.drafts_postgres import PostgresDraftStore
from ragwright.application import AnswerOutcome, AnswerRequest, Application, IngestRequest
from ragwright.application.drafts import (
    Draft,
    DraftStore,
    input_version,
    normalise_question,
    question_key,
)
from ragwright.errors import FailureCategory, StorageError
from ragwright.runtime import RuntimeComponents
from ragwright.settings import load_settings
from ragwright.testing.fakes import ManualClock
from ragwright.testing.scripted import Fail, ScriptedChatModel, Step
from tests.adapters.qdrant_server import serve_qdrant_double
from tests.application.components import FakeComponents, answered
from tests.application.postgres import POSTGRES_URL, fresh_schema
from tests.replicas import scratch_database

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
QUESTION = "How are refunds paid back?"
ANSWER = "Refunds go back to the original card within five days."
TEXTS = {
    "acme": ANSWER,
    "globex": "Refunds go back to the original card within five days.",
}


def write_doc(root: Path, tenant: str, text: str) -> None:
    path = root / tenant / "refunds.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "---\ndocument_id: refunds\ndocument_type: runbook\npublication_state: published\n"
        f"tenant: {tenant}\n---\n# Refunds\n\n## Steps\n\n{text}\n",
        "utf-8",
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """acme/refunds.md and globex/refunds.md: the same id and the same text, so only the
    tenant tells their drafts apart."""
    root = tmp_path / "corpus"
    for tenant, text in TEXTS.items():
        write_doc(root, tenant, text)
    return root


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def answers_once() -> ScriptedChatModel:
    """The first call answers citing S1; every later call fails transiently."""
    script: list[Step] = [answered("S1", text=ANSWER)]
    script += [Fail(FailureCategory.TRANSIENT)] * 30
    return ScriptedChatModel(script)


def application(
    home: Path, clock: ManualClock, model: ScriptedChatModel | None = None, **settings: object
) -> tuple[Application, FakeComponents]:
    settings.setdefault("answer_style", "generated")
    settings.setdefault("chat_retries", 1)  # one attempt: the outage shows at once
    components = FakeComponents(load_settings(home=home, **settings), model or answers_once())
    return Application(components, clock=clock), components


def ask(app: Application, tenant: str | None = "acme", **fields: Any) -> AnswerOutcome:
    return asyncio.run(app.answer(AnswerRequest(QUESTION, tenant=tenant, **fields)))


@pytest.fixture
def answered_once(
    tmp_path: Path, corpus: Path, clock: ManualClock
) -> tuple[Application, FakeComponents]:
    """An indexed home where acme's question was answered once (the model is now down)."""
    app, components = application(tmp_path / "home", clock)
    app.ingest(IngestRequest(sources=(corpus,)))
    first = ask(app)
    assert first.mode == "generated" and first.to_dict()["draft"] is None
    return app, components


# --- the application -----------------------------------------------------------------------


def test_a_draft_is_shown_labelled_with_its_age_while_the_model_is_down(
    answered_once: tuple[Application, FakeComponents], clock: ManualClock
) -> None:
    app, components = answered_once
    first_citations = (
        components.draft_store().find("acme", question_key(QUESTION))[0].result["citations"]
    )
    clock.advance(90)
    outcome = ask(app)
    body = outcome.to_dict()
    assert (outcome.mode, outcome.reason) == ("previous_draft", "model_unavailable")
    assert body["answer"] == ANSWER and body["citations"] == first_citations
    assert body["citations"][0]["document_id"] == "refunds"
    assert body["draft"]["created_at"] == "2027-01-15T08:00:00Z"
    assert body["draft"]["age_seconds"] == 90
    assert body["provenance"]["model"] == "scripted-model"  # who wrote the draft
    assert components.model.calls == 2  # the model was asked, and failed


def test_the_question_matches_after_normalisation(
    answered_once: tuple[Application, FakeComponents],
) -> None:
    app, _ = answered_once
    asked = AnswerRequest("  how are REFUNDS paid   back? ", tenant="acme")
    outcome = asyncio.run(app.answer(asked))
    assert outcome.mode == "previous_draft"
    assert normalise_question("  How are REFUNDS  paid back? ") == "how are refunds paid back?"


def test_a_draft_never_crosses_tenants(
    answered_once: tuple[Application, FakeComponents],
) -> None:
    app, components = answered_once
    # globex holds the same document id and text: only the tenant differs.
    outcome = ask(app, tenant="globex")
    assert (outcome.mode, outcome.reason) == ("evidence_only", "model_unavailable")
    assert outcome.to_dict()["draft"] is None and outcome.to_dict()["answer"] == ""
    assert components.draft_store().find("globex", question_key(QUESTION)) == []


def test_no_draft_after_the_cited_document_changed_it_is_purged(
    answered_once: tuple[Application, FakeComponents], corpus: Path
) -> None:
    app, components = answered_once
    write_doc(corpus, "acme", "Refunds are paid as store credit from now on.")
    app.ingest(IngestRequest(sources=(corpus,)))
    assert components.draft_store().find("acme", question_key(QUESTION)) == []
    assert ask(app).mode == "evidence_only"


@pytest.mark.slow
def test_a_queued_ingestion_that_changes_a_cited_document_purges_its_drafts(
    tmp_path: Path, corpus: Path, clock: ManualClock
) -> None:
    # ingest --queue: the coordinator validates, workers elsewhere write into the Qdrant
    # server (here the REST double), and the coordinator purges once the items are done.
    script: list[Step] = [answered("S1", text=ANSWER)] * 2 + [Fail(FailureCategory.TRANSIENT)]
    with scratch_database() as database, serve_qdrant_double(record=False) as (qdrant, _):
        shared = {
            "backend": "qdrant",
            "qdrant_location": qdrant,
            "collection": "drafts",
            "database_url": database,
        }
        app, components = application(
            tmp_path / "home", clock, ScriptedChatModel(script * 10), **shared
        )
        app.ingest(IngestRequest(sources=(corpus,)))
        assert ask(app).mode == ask(app, tenant="globex").mode == "generated"
        write_doc(corpus, "acme", "Refunds are paid as store credit from now on.")
        worker, _ = application(tmp_path / "worker", clock, **shared)  # another machine
        stop = threading.Event()
        working = threading.Thread(
            target=worker.ingest_worker, kwargs={"worker": "w1", "stop": stop}, daemon=True
        )
        working.start()
        try:
            result = app.ingest_queued(IngestRequest(sources=(corpus,)), item_size=1)
        finally:
            stop.set()
            working.join(60)
        store = components.draft_store()
        acme = store.find("acme", question_key(QUESTION))
        globex = store.find("globex", question_key(QUESTION))
        store.close()
    assert result.to_dict()["documents_changed"] == 1
    assert acme == [] and len(globex) == 1  # only the tenant whose document changed


def test_a_replica_that_missed_the_purge_still_refuses_the_changed_draft(
    answered_once: tuple[Application, FakeComponents], corpus: Path, clock: ManualClock
) -> None:
    app, components = answered_once
    write_doc(corpus, "acme", "Refunds are paid as store credit from now on.")
    # Another process ingests without purging (drafts off there): the draft stays stored.
    elsewhere, _ = application(components.settings.storage.home, clock, draft_max_age=0)
    elsewhere.ingest(IngestRequest(sources=(corpus,)))
    assert len(components.draft_store().find("acme", question_key(QUESTION))) == 1
    outcome = ask(app)
    assert outcome.mode == "evidence_only" and outcome.to_dict()["draft"] is None


def test_an_unchanged_reingest_keeps_the_draft(
    answered_once: tuple[Application, FakeComponents], corpus: Path
) -> None:
    app, _ = answered_once
    app.ingest(IngestRequest(sources=(corpus,)))
    assert ask(app).mode == "previous_draft"


def test_no_draft_when_it_is_older_than_the_max_age(
    answered_once: tuple[Application, FakeComponents], clock: ManualClock
) -> None:
    app, _ = answered_once
    clock.advance(86400)
    assert ask(app).mode == "previous_draft"  # exactly the max age still counts
    clock.advance(1)
    outcome = ask(app)
    assert outcome.mode == "evidence_only" and outcome.to_dict()["draft"] is None


def test_no_draft_when_the_instructions_version_changed(
    answered_once: tuple[Application, FakeComponents], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = answered_once
    monkeypatch.setattr(
        "ragwright.application.answering.instructions_version", lambda style, context: "v2"
    )
    assert ask(app).mode == "evidence_only"


def test_no_draft_when_the_assembly_policy_differs(
    answered_once: tuple[Application, FakeComponents],
) -> None:
    app, _ = answered_once
    assert ask(app, policy="seed-baseline+edges").mode == "evidence_only"
    assert ask(app).mode == "previous_draft"  # the draft's own policy still matches


def test_a_draft_takes_precedence_over_an_approved_template(
    tmp_path: Path, corpus: Path, clock: ManualClock
) -> None:
    templates = tmp_path / "templates.yaml"
    templates.write_text(
        "templates:\n  - id: refunds\n    version: '1'\n    phrases: [refunds]\n"
        "    text: Refunds are handled by the billing team.\n",
        "utf-8",
    )
    app, _ = application(tmp_path / "home", clock, templates=templates)
    app.ingest(IngestRequest(sources=(corpus,)))
    assert ask(app).mode == "generated"
    assert ask(app).mode == "previous_draft"
    assert ask(app, tenant="globex").mode == "approved_template"


def test_max_age_zero_stores_and_shows_no_draft(
    tmp_path: Path, corpus: Path, clock: ManualClock
) -> None:
    app, _ = application(tmp_path / "home", clock, draft_max_age=0)
    app.ingest(IngestRequest(sources=(corpus,)))
    assert ask(app).mode == "generated"
    assert ask(app).mode == "evidence_only"
    assert not (tmp_path / "home" / "drafts.sqlite3").exists()


def test_an_answer_without_drafts_neither_keeps_nor_shows_them(
    answered_once: tuple[Application, FakeComponents],
) -> None:
    # What evaluation runs use: they measure the model, not earlier answers.
    app, _ = answered_once
    request = AnswerRequest(QUESTION, tenant="acme")
    assert asyncio.run(app.answer(request, drafts=False)).mode == "evidence_only"
    assert ask(app).mode == "previous_draft"


def test_a_broken_draft_store_costs_the_draft_never_the_answer(
    tmp_path: Path, corpus: Path, clock: ManualClock
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with sqlite3.connect(home / "drafts.sqlite3") as db:  # something else's database
        db.execute("CREATE TABLE other (x)")
    app, _ = application(home, clock)
    app.ingest(IngestRequest(sources=(corpus,)))
    assert ask(app).mode == "generated"
    assert ask(app).mode == "evidence_only"


# --- the input version ---------------------------------------------------------------------

BASE: dict[str, Any] = {
    "tenant": "acme",
    "assembly_policy": "seed-baseline",
    "instructions_version": "generated:seed-baseline:0123456789ab",
    "cited": (("refunds", "r1"), ("faq", "r7")),
}


@pytest.mark.parametrize(
    "change",
    [
        {"tenant": "globex"},
        {"tenant": None},
        {"assembly_policy": "seed-baseline+edges"},
        {"instructions_version": "generated:seed-baseline:ba9876543210"},
        {"cited": (("refunds", "r2"), ("faq", "r7"))},
        {"cited": (("refunds", "r1"),)},
    ],
    ids=["tenant", "untenanted", "policy", "instructions", "revision", "fewer documents"],
)
def test_any_input_change_is_another_input_version(change: dict[str, Any]) -> None:
    assert input_version(**{**BASE, **change}) != input_version(**BASE)


def test_the_input_version_ignores_the_order_of_citations() -> None:
    reordered = {**BASE, "cited": (("faq", "r7"), ("refunds", "r1"), ("faq", "r7"))}
    assert input_version(**reordered) == input_version(**BASE)


# --- the stores ----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DraftStore]:
    if request.param == "sqlite":
        drafts: DraftStore = SqliteDraftStore(tmp_path / "drafts.sqlite3")
        yield drafts
        drafts.close()
        return
    with fresh_schema() as schema:
        drafts = PostgresDraftStore(POSTGRES_URL, schema)
        yield drafts
        drafts.close()


def draft(
    tenant: str | None = "acme",
    question: str = QUESTION,
    cited: tuple[tuple[str, str], ...] = (("refunds", "r1"),),
    created_at: float = NOW,
    answer: str = ANSWER,
) -> Draft:
    return Draft(
        tenant=tenant,
        question_key=question_key(question),
        input_version=input_version(
            tenant=tenant, assembly_policy="p", instructions_version="i", cited=cited
        ),
        cited=cited,
        result={"answer": answer, "citations": [{"document_id": d} for d, _ in cited]},
        created_at=created_at,
    )


def test_a_stored_draft_reads_back_whole(store: DraftStore) -> None:
    stored = draft(cited=(("faq", "r7"), ("refunds", "r1")))
    store.put(stored)
    assert store.find("acme", stored.question_key) == [stored]


def test_find_returns_the_newest_first(store: DraftStore) -> None:
    older = draft(created_at=NOW - 60, cited=(("refunds", "r1"),))
    newer = draft(created_at=NOW, cited=(("refunds", "r2"),))
    store.put(older)
    store.put(newer)
    assert [d.input_version for d in store.find("acme", older.question_key)] == [
        newer.input_version,
        older.input_version,
    ]
    assert len(store.find("acme", older.question_key, limit=1)) == 1


def test_the_same_inputs_replace_the_stored_draft(store: DraftStore) -> None:
    store.put(draft(created_at=NOW - 60, answer="first"))
    store.put(draft(created_at=NOW, answer="second"))
    found = store.find("acme", question_key(QUESTION))
    assert [(d.result["answer"], d.created_at) for d in found] == [("second", NOW)]


def test_find_never_returns_another_tenants_draft(store: DraftStore) -> None:
    store.put(draft(tenant="acme"))
    store.put(draft(tenant=None, answer="untenanted"))
    key = question_key(QUESTION)
    assert store.find("globex", key) == []
    assert [d.tenant for d in store.find("acme", key)] == ["acme"]
    assert [d.result["answer"] for d in store.find(None, key)] == ["untenanted"]


def test_purge_deletes_drafts_citing_the_documents_of_that_tenant_only(store: DraftStore) -> None:
    key = question_key(QUESTION)
    store.put(draft(tenant="acme", cited=(("faq", "r7"), ("refunds", "r1"))))
    store.put(draft(tenant="acme", question="Who is paged?", cited=(("oncall", "r1"),)))
    store.put(draft(tenant="globex", cited=(("refunds", "r1"),)))
    assert store.purge_documents("acme", ["refunds", "unrelated"]) == 1
    assert store.find("acme", key) == []
    assert len(store.find("acme", question_key("Who is paged?"))) == 1
    assert len(store.find("globex", key)) == 1  # another tenant's document of that id
    assert store.purge_documents("acme", []) == 0
    # The draft's other cited document went with it: a later put of the same inputs
    # is stored again and purged again.
    store.put(draft(tenant="acme", cited=(("faq", "r7"), ("refunds", "r1"))))
    assert store.purge_documents("acme", ["faq"]) == 1


def test_a_database_of_something_else_is_refused_not_extended(tmp_path: Path) -> None:
    path = tmp_path / "drafts.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE other (x)")
    with pytest.raises(StorageError) as raised:
        SqliteDraftStore(path)
    assert raised.value.path == str(path) and "not a draft store" in raised.value.reason


def test_a_newer_postgres_draft_schema_is_refused() -> None:
    with fresh_schema() as schema:
        PostgresDraftStore(POSTGRES_URL, schema).close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
            db.execute(
                f"UPDATE \"{schema}\".schema_versions SET version = 9 WHERE component = 'drafts'"
            )
        with pytest.raises(StorageError) as raised:
            PostgresDraftStore(POSTGRES_URL, schema)
        assert "drafts schema version 9" in raised.value.reason


def test_the_draft_store_is_sqlite_in_the_home_else_postgres(tmp_path: Path) -> None:
    local = RuntimeComponents(load_settings(home=tmp_path / "home"))
    store = local.draft_store()
    assert isinstance(store, SqliteDraftStore) and store is local.draft_store()
    assert store.path == tmp_path / "home" / "drafts.sqlite3"
    store.close()
    shared = RuntimeComponents(load_settings(home=tmp_path / "home", database_url=POSTGRES_URL))
    remote = shared.draft_store()
    assert isinstance(remote, PostgresDraftStore) and remote is shared.draft_store()
    remote.close()

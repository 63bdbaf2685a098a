"""Work item bodies: what a worker on another machine gets is the run's documents, policy
and context exactly as the coordinator had them."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import cast

import pytest

from ragwright.application.ingest_queue import (
    DEADLINE_GRACE,
    ITEM_FORMAT,
    STALL_WARNING,
    IngestQueue,
    ItemResult,
    document_from_json,
    document_to_json,
    item_body,
    read_item_body,
    wait_for_results,
)
from ragwright.errors import IngestRunExpired, RequestError
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

DOCUMENTS = (
    SourceDocument(
        "faq",
        "Questions",
        "runbook",
        "draft",
        (SourceSection("intro", "Questions", ("One.", "Two\nlines.")),),
        revision="r7",
        source_uri="docs/faq.md",
        tenant="acme",
    ),
    # A PDF: its sections record each paragraph's page.
    SourceDocument(
        "runbook.pdf",
        "Runbook",
        "runbook",
        "published",
        (SourceSection("page-2", "Page 2", ("A.", "B."), (2, 2)),),
        "h2",
        source_uri="docs/runbook.pdf",
    ),
    # A BEIR document: blank title and heading, no tenant, no source.
    SourceDocument("4983", "", "note", "published", (SourceSection("text", "", ("T.",)),), "h1"),
)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.document_id)
def test_a_document_survives_the_item_unchanged(document: SourceDocument) -> None:
    assert document_from_json(json.loads(json.dumps(document_to_json(document)))) == document


def test_an_item_body_carries_documents_policy_context_and_profiles() -> None:
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=120, overlap=False, max_tokens=256)
    body = item_body(
        DOCUMENTS,
        context={"chunking_version": policy.version, "staging_avgdl": 25.6},
        policy=policy,
        embedding_profile="minilm",
        lexical_profile="bm25",
        deadline_at=1_800_000_000.5,
    )
    read = read_item_body(json.loads(json.dumps(body)))
    assert read.documents == DOCUMENTS
    assert read.policy == policy
    assert read.context == {"chunking_version": policy.version, "staging_avgdl": 25.6}
    assert (read.embedding_profile, read.lexical_profile) == ("minilm", "bm25")
    assert read.deadline_at == 1_800_000_000.5
    # An item of a run without a deadline, or from a ragwright that sent none.
    assert read_item_body({**body, "deadline_at": None}).deadline_at is None
    assert read_item_body({k: v for k, v in body.items() if k != "deadline_at"}).deadline_at is None


def test_a_body_of_another_format_is_refused() -> None:
    body = item_body(
        DOCUMENTS, context={}, policy=ChunkingPolicy(), embedding_profile="e", lexical_profile="l"
    )
    with pytest.raises(RequestError, match="format"):
        read_item_body({**body, "format": ITEM_FORMAT + 1})


class _RecordingQueue:
    """A queue whose results arrive on a script: ``arrivals`` maps a poll number to the
    results recorded by then; records every renewal."""

    def __init__(self, arrivals: dict[int, list[ItemResult]]) -> None:
        self.arrivals = arrivals
        self.polls = 0
        self.renewals = 0

    def renew_run(self, run_id: str) -> None:
        self.renewals += 1

    def results(self, run_id: str, *, known: Collection[int] = ()) -> list[ItemResult]:
        self.polls += 1
        return [
            r
            for n, batch in self.arrivals.items()
            if n <= self.polls
            for r in batch
            if r.number not in known
        ]


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        # A wait that would never end fails the test instead of hanging it.
        assert self.now < 1_000.0 + 3_600, "the wait did not end"


def _result(number: int) -> ItemResult:
    return ItemResult(number, "w", report={"chunks": 1}, sequence=number + 1)


def test_the_wait_ends_past_the_runs_deadline_naming_the_items_without_a_result() -> None:
    clock = _Clock()
    queue = _RecordingQueue({1: [_result(0)]})
    deadline_at = clock.now + 30
    with pytest.raises(IngestRunExpired) as raised:
        wait_for_results(
            cast(IngestQueue, queue),
            "run1",
            3,
            poll=1.0,
            on_result=lambda _r: None,
            deadline_at=deadline_at,
            clock=clock,
            sleep=clock.sleep,
        )
    assert (raised.value.outstanding, raised.value.items) == (2, 3)
    assert "RAGWRIGHT_INGEST_DEADLINE" in str(raised.value)
    # It kept waiting (and renewing the run) until the grace after the deadline, not less.
    assert deadline_at + DEADLINE_GRACE < clock.now <= deadline_at + DEADLINE_GRACE + 1.0
    assert queue.renewals == queue.polls


def test_without_a_deadline_the_wait_warns_while_no_result_arrives_and_finishes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    arrival = int(STALL_WARNING * 2.5)
    queue = _RecordingQueue({1: [_result(0)], arrival: [_result(1)]})
    seen: list[int] = []
    with caplog.at_level("WARNING", logger="ragwright.application.ingest_queue"):
        wait_for_results(
            cast(IngestQueue, queue),
            "run1",
            2,
            poll=1.0,
            on_result=lambda r: seen.append(r.number),
            clock=clock,
            sleep=clock.sleep,
        )
    assert seen == [0, 1]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert all("1 of 2 outstanding" in w and "ingest-worker" in w for w in warnings)

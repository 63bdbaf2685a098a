"""Bounded memory: ingestion holds a slice of documents at a time, never the corpus.

Wall-clock and RSS figures are in benchmarks/ingest_memory.py; this guards the property
they rest on, cheaply: how many source documents are alive at once during a run, in one
process and in the coordinator of a queued run (``ingest --queue``).
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
import traceback
import tracemalloc
import warnings
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.application import Application, IngestRequest
from ragwright.core import keysets
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.pipeline.ingest import DOCUMENT_SLICE as VALIDATION_SLICE
from ragwright.pipeline.ingest import ingest, prepare_run
from ragwright.pipeline.writing import SLICES_IN_FLIGHT
from ragwright.settings import load_settings
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import (
    ChunkingPolicy,
    DocumentOrigin,
    SkippedDocument,
    SourceDocument,
    SourceSection,
)
from tests.adapters.qdrant_server import serve_qdrant_double
from tests.application.components import FakeComponents
from tests.replicas import scratch_database

POLICY = ChunkingPolicy(max_words=30)
DOCUMENTS = 600
DOCUMENT_SLICE = 50


class _TrackedDocument(SourceDocument):
    """A source document a weak reference can follow (the dataclass is slotted)."""

    __slots__ = ("__weakref__",)


class CountingSource:
    """Generates ``count`` documents on each pass and records the most alive at once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.alive: weakref.WeakSet[SourceDocument] = weakref.WeakSet()
        self.most_alive = 0
        self.passes = 0

    def __iter__(self) -> Iterator[SourceDocument]:
        self.passes += 1
        if self.passes == 1:
            # Garbage cycles left by earlier tests in this process (a client socket
            # they leaked, say) belong to them: collect them before counting, so their
            # ResourceWarning is not reported here, mid-run. This run's own garbage is
            # still collected below, with warnings as errors.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()
        for number in range(self.count):
            if number % 25 == 0:
                gc.collect()  # documents in collected cycles are not alive
                self.most_alive = max(self.most_alive, len(self.alive))
            made = validate_document(
                document_id=f"doc-{number:04d}",
                title=f"Document {number}",
                document_type="runbook",
                publication_state="published",
                sections=[SourceSection("body", "Body", (f"Paragraph of document {number}.",))],
            )
            document = _TrackedDocument(
                **{f.name: getattr(made, f.name) for f in dataclasses.fields(made) if f.init}
            )
            object.__setattr__(document, "content_hash", made.content_hash)
            self.alive.add(document)
            yield document


def test_ingestion_holds_a_bounded_number_of_documents_at_once(tmp_path: Path) -> None:
    source = CountingSource(DOCUMENTS)
    with EdgeIndex(tmp_path / "index", contract_for(HASHING_PROFILE, POLICY.version)) as index:
        report = ingest(
            source,
            policy=POLICY,
            embedder=HashingEmbedder(),
            sparse_encoder=Bm25Encoder(),
            index=index,
            slice_size=DOCUMENT_SLICE,
        )
    assert (report.documents, report.documents_changed, source.passes) == (600, 600, 2)
    # The slice being read plus the slices being written (one switching, the next ones
    # embedding); a run that listed the corpus would hold all 600.
    assert 0 < source.most_alive <= (1 + SLICES_IN_FLIGHT) * DOCUMENT_SLICE


class PlainSource:
    """``count`` one-paragraph documents, generated again on each pass."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> Iterator[SourceDocument]:
        for number in range(self.count):
            yield validate_document(
                document_id=f"document-{number:06d}",
                title=f"Document {number}",
                document_type="runbook",
                publication_state="published",
                sections=[SourceSection("body", "Body", (f"Paragraph {number}.",))],
            )


def _retained_by_plan(index: EdgeIndex, documents: int) -> int:
    """Python bytes the validation pass's plan of ``documents`` new documents keeps."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        plan = prepare_run(
            PlainSource(documents),
            policy=POLICY,
            embedder=HashingEmbedder(),
            sparse_encoder=Bm25Encoder(),
            index=index,
        )
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert (plan.documents, len(plan.changed)) == (documents, documents)
    return retained


def test_a_run_keeps_a_few_bytes_a_document_not_its_keys_as_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state a run keeps for every document it read (the duplicate check, prune's
    keys, the changed set, ids shared across tenants) is 16-byte digests: some 50 bytes
    a document for all of it. As tuples of strings in sets it was over 300."""
    monkeypatch.setattr(keysets, "_MERGE_AT", 256)  # small runs reach the sorted columns
    with EdgeIndex(tmp_path / "index", contract_for(HASHING_PROFILE, POLICY.version)) as index:
        small = _retained_by_plan(index, 1_000)
        large = _retained_by_plan(index, 5_000)
    per_document = (large - small) / 4_000
    assert per_document < 80, f"{per_document:.0f} bytes a document"


class CountingStream(CountingSource):
    """The counting source as the application streams sources (it skips nothing)."""

    skipped: tuple[tuple[str, str, str], ...] = ()
    invalid: tuple[SkippedDocument, ...] = ()
    origins: tuple[DocumentOrigin, ...] = ()
    origins_left_out = 0


class StreamedComponents(FakeComponents):
    """The application's components with the sources replaced by ``stream``."""

    def __init__(self, home: Path, qdrant_url: str, database: str, stream: CountingStream):
        super().__init__(
            load_settings(
                home=home,
                backend="qdrant",
                qdrant_location=qdrant_url,
                database_url=database,
                max_words=POLICY.max_words,
                ingest_lease=5.0,
            )
        )
        self.stream = stream

    def stream_sources(self, paths: Sequence[Path], **_options: object) -> CountingStream:
        return self.stream


ITEM_SIZE = 20


@pytest.mark.slow
def test_a_queued_run_holds_a_bounded_number_of_documents_in_the_coordinator(
    tmp_path: Path,
) -> None:
    """The coordinator validates, then reads the sources again to queue the changed
    documents item by item; a worker (a thread here, with its own components, on the
    same queue and Qdrant server) writes them. Documents the worker rebuilds from the
    items are not the source's, so only the coordinator's are counted."""
    source = CountingStream(DOCUMENTS)
    with scratch_database() as database, serve_qdrant_double(record=False) as (url, _):
        coordinator = Application(StreamedComponents(tmp_path / "c", url, database, source))
        worker = Application(StreamedComponents(tmp_path / "w", url, database, source))
        stop = threading.Event()
        working = threading.Thread(
            target=worker.ingest_worker, kwargs={"worker": "w", "stop": stop}
        )
        working.start()
        outcome: dict[str, Any] = {}

        def coordinate() -> None:
            try:
                outcome["result"] = coordinator.ingest_queued(
                    IngestRequest(sources=(tmp_path,)), item_size=ITEM_SIZE, poll=0.05
                )
            except BaseException as error:
                outcome["error"] = error

        # The coordinator waits for every item's result: a worker that died would leave
        # it waiting, so it runs on a thread the test stops waiting for.
        coordinating = threading.Thread(target=coordinate, daemon=True)
        coordinating.start()
        coordinating.join(timeout=240)
        stop.set()
        working.join(timeout=60)
        assert not coordinating.is_alive(), "".join(
            traceback.format_stack(sys._current_frames()[coordinating.ident or 0])
        )
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert (result.documents, result.documents_changed, result.verified) == (600, 600, 600)
    # A validation slice while the next one is read, later an item and the next one; a
    # coordinator that listed the corpus would hold all 600.
    assert 0 < source.most_alive <= 2 * max(VALIDATION_SLICE, ITEM_SIZE)
    # Read before the index opens, validated, then queued: three passes, none kept.
    assert source.passes == 3

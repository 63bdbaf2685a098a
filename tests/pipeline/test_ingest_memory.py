"""Bounded memory: ingestion holds a batch of documents at a time, never the corpus.

Wall-clock and RSS figures are in benchmarks/ingest_memory.py; this guards the property
they rest on, cheaply: how many source documents are alive at once during a run.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

from ragwright.adapters.edge import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.pipeline.ingest import BATCHES_IN_FLIGHT, ingest
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

POLICY = ChunkingPolicy(max_words=30)
DOCUMENTS = 600
DOCUMENT_BATCH = 50


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
                **{name: getattr(made, name) for name in SourceDocument.__slots__}
            )
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
            document_batch=DOCUMENT_BATCH,
        )
    assert (report.documents, report.documents_changed, source.passes) == (600, 600, 2)
    # The batch being read plus the batches being written (one switching, the next ones
    # embedding); a run that listed the corpus would hold all 600.
    assert 0 < source.most_alive <= (1 + BATCHES_IN_FLIGHT) * DOCUMENT_BATCH

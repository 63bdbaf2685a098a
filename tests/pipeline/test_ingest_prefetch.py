"""The validation pass asks the index to prefetch its payloads once the run's scans cover
a tenth of the stored points (pipeline/planning.py, ScanPrefetch)."""

from __future__ import annotations

from typing import Any

from ragwright.core.points import CHANGE_KEY
from ragwright.pipeline.planning import PREFETCH_AFTER_SHARE
from tests.pipeline.test_ingest_stream import RecordingIndex, corpus, doc, open_index, run

__all__ = ["open_index"]  # the fixture


class PrefetchRecorder(RecordingIndex):
    """Records, in order, each scan's number of documents and each prefetch with what
    the real index advised."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.events: list[tuple[str, int]] = []

    def scroll(self, point_filter: Any = None, **kw: Any) -> Any:
        ids = next((m.values for m in point_filter.must if m.key == "document_id"), ())
        self.events.append(("scan", len(ids)))
        return super().scroll(point_filter, **kw)

    def prefetch_payloads(self) -> int:
        advised = self.inner.prefetch_payloads()
        self.events.append(("prefetch", advised))
        return advised


def rerun_unchanged(index: PrefetchRecorder) -> None:
    """Ingest the same 40 documents again, recording only this run's events."""
    index.events.clear()
    report = run(index, corpus(40), slice_size=3)
    assert report.documents_changed == 0


def test_a_rerun_that_must_scan_an_unchanged_corpus_prefetches_once_after_a_tenth(
    open_index: Any,
) -> None:
    index = PrefetchRecorder(open_index("i"))
    run(index, corpus(40), slice_size=3)
    # The first run wrote into an empty index: nothing to prefetch.
    assert [e for e in index.events if e[0] == "prefetch"] == []
    # Points written before change keys existed: no document is proven unchanged by
    # counts (pipeline/unchanged.py), so every one is scanned.
    index.inner.delete_payload_keys([p.point_id for p in index.inner.scroll()], [CHANGE_KEY])
    rerun_unchanged(index)
    prefetches = [i for i, e in enumerate(index.events) if e[0] == "prefetch"]
    assert len(prefetches) == 1
    scanned_before = sum(n for kind, n in index.events[: prefetches[0]] if kind == "scan")
    # Every document has as many points: a tenth of them is a tenth of the documents,
    # reached by the scan just before the prefetch and not by the ones before it.
    assert scanned_before >= PREFETCH_AFTER_SHARE * 40
    assert scanned_before - 3 < PREFETCH_AFTER_SHARE * 40
    # What the real index advised: its payload files' data.
    assert index.events[prefetches[0]][1] > 0


def test_a_rerun_proven_unchanged_by_counts_scans_and_prefetches_nothing(
    open_index: Any,
) -> None:
    index = PrefetchRecorder(open_index("i"))
    run(index, corpus(40), slice_size=3)
    rerun_unchanged(index)
    assert index.events == []


def test_a_run_over_a_small_part_of_the_index_does_not_prefetch(open_index: Any) -> None:
    index = PrefetchRecorder(open_index("i"))
    run(index, corpus(40), slice_size=3)
    index.events.clear()
    report = run(index, [doc(100), doc(101)], slice_size=3)
    assert report.documents_changed == 2
    assert [e for e in index.events if e[0] == "prefetch"] == []

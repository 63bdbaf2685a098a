"""The ingest records, one derived from the other: a slice's report, a run's report (the
slices summed, with the run's own counts) and the use case's result (the run's report
with its sources and profile). The result's JSON form keeps the keys and their order it
has always printed (``ragwright ingest --json``, ``POST /v1/ingestions``)."""

from __future__ import annotations

import json

from ragwright.application.requests.corpus import IngestResult
from ragwright.types import IngestReport, SharedDocumentId, SliceReport

SHARED = SharedDocumentId("faq", "acme", (None,))

# As printed before the records were derived from one another.
PRINTED_KEYS = [
    "documents",
    "chunks",
    "embedded",
    "unchanged",
    "payload_updated",
    "deleted",
    "verified",
    "documents_changed",
    "documents_pruned",
    "embedding_tokens",
    "bm25_avgdl",
    "sparse_reencoded",
    "chunking_version",
    "embedding_profile",
    "skipped_files",
    "skipped_documents",
    "tenants",
    "shared_ids",
    "sources",
    "pruned",
    "metadata",
    "metadata_left_out",
    "split_documents",
    "split_sources",
]


def test_slice_reports_add_their_counts_and_join_their_lists_in_order() -> None:
    first = SliceReport(chunks=3, embedded=2, verified=3, documents_changed=1, shared_ids=(SHARED,))
    second = SliceReport(
        chunks=4, deleted=1, embedding_tokens=9, changed_documents=(("acme", "faq"), (None, "x"))
    )
    total = SliceReport.total([first, second])
    assert total == SliceReport(
        chunks=7,
        embedded=2,
        deleted=1,
        verified=3,
        documents_changed=1,
        embedding_tokens=9,
        shared_ids=(SHARED,),
        changed_documents=(("acme", "faq"), (None, "x")),
    )
    assert SliceReport.total([]) == SliceReport()
    assert SliceReport.from_json(json.loads(json.dumps(total.to_json()))) == total


def test_the_result_is_the_runs_report_with_its_sources_and_prints_the_same_keys() -> None:
    report = IngestReport(
        documents=2,
        unchanged=5,
        chunks=9,
        embedded=4,
        documents_changed=1,
        tenants=(None, "acme"),
        shared_ids=(SHARED,),
        changed_documents=(("acme", "faq"),),
    )
    result = IngestResult.of_report(
        report, chunking_version="v1", embedding_profile="p1", sources=("docs",), pruned=True
    )
    assert isinstance(result, IngestReport)
    assert (result.documents, result.unchanged, result.chunks, result.shared_ids) == (
        2,
        5,
        9,
        (SHARED,),
    )
    assert result.changed_documents == ()  # purged as the run went, never printed
    printed = result.to_dict()
    assert list(printed) == PRINTED_KEYS
    assert printed["tenants"] == [None, "acme"]
    assert printed["shared_ids"] == [
        {"document_id": "faq", "tenant": "acme", "other_tenants": [None]}
    ]
    assert json.loads(json.dumps(printed)) == printed

"""The text ``chunks`` and ``ingest`` print: a run's summary, which documents had split
paragraphs, where each document's metadata came from, and what was left out and why
(``--json`` prints the records themselves)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ragwright.cli.common import plural

if TYPE_CHECKING:
    from ragwright.application import SkippedFile
    from ragwright.types import SkippedDocument


def split_note(split: Sequence[str], more: int = 0) -> str:
    """The documents with a paragraph split at sentence boundaries to fit the budget."""
    named = ", ".join(split) + (f" and {more} more" if more else "")
    return (
        f"split at sentences to fit the budget: long paragraphs of "
        f"{plural(len(split) + more, 'document')} ({named}); the rest as written"
    )


def print_skipped(skipped: Sequence[SkippedFile], invalid: Sequence[SkippedDocument] = ()) -> None:
    print_skipped_forms([asdict(s) for s in skipped], [asdict(d) for d in invalid])


def print_metadata(rows: list[dict[str, Any]], left_out: int, *, limit: int | None = None) -> None:
    """Where each document's metadata came from, from their JSON forms; past ``limit``
    documents, how many took each field from where."""
    if not rows:
        return
    if limit is not None and len(rows) + left_out > limit:
        counts: dict[str, int] = {}
        for row in rows:
            for field, key in (("type", "type_from"), ("state", "state_from")):
                label = f"{field} from {row[key]}"
                counts[label] = counts.get(label, 0) + 1
        summary = ", ".join(f"{label} ({count})" for label, count in sorted(counts.items()))
        print(f"metadata of {plural(len(rows) + left_out, 'document')} read from files: {summary}")
        return
    print("metadata (where each field came from):")
    for row in rows:
        tenant = row["tenant"] if row["tenant"] is not None else "-"
        print(
            f"  {row['source']}: id {row['document_id']!r} ({row['id_from']}), "
            f"title {row['title']!r} ({row['title_from']}), "
            f"type {row['document_type']} ({row['type_from']}), "
            f"state {row['publication_state']} ({row['state_from']}), "
            f"tenant {tenant} ({row['tenant_from']})"
        )
    if left_out:
        print(f"  ... and {plural(left_out, 'more document')}")


def print_skipped_forms(skipped: list[dict[str, Any]], invalid: list[dict[str, Any]]) -> None:
    """The files and invalid documents a run left out, from their JSON forms."""
    if skipped:
        print(f"skipped {plural(len(skipped), 'file')}:")
        for item in skipped:
            print(f"  {item['path']}: {item['reason']}")
    if invalid:
        print(f"skipped {plural(len(invalid), 'invalid document')} (--skip-invalid):")
        for item in invalid:
            print(
                f"  {item['document_id']!r} ({item['source']}): {item['field']}: {item['reason']}"
            )


def print_ingest_summary(data: dict[str, Any], server: str | None) -> None:
    """An ingest run's summary from its JSON form (``server``: the service it went to)."""
    print(
        f"{plural(data['documents'], 'document')}, {plural(data['chunks'], 'chunk')} "
        f"({data['chunking_version']}, {data['embedding_profile']}): "
        f"{data['embedded']} embedded, {data['unchanged']} unchanged, "
        f"{data['payload_updated']} payload updated, {data['deleted']} deleted, "
        f"{data['verified']} verified{_lexical_figures(data)}"
    )
    tenants = ", ".join(tenant_name(t) for t in data["tenants"]) or "none"
    action = (
        f"pruned {plural(data['documents_pruned'], 'document')} missing from"
        if data["pruned"]
        else "not pruned (no --prune); sources"
    )
    where = f" (through {server})" if server else ""
    print(f"scope: tenants {tenants}; {action} {' '.join(data['sources'])}{where}")
    for shared in data.get("shared_ids", ()):  # the operator's report only, not HTTP
        others = ", ".join(tenant_name(t) for t in shared["other_tenants"])
        print(
            f"  {shared['document_id']!r} ({tenant_name(shared['tenant'])}) is also indexed "
            f"for {others}: left as it is (a document is its tenant and id; ingest that "
            "tenant with --prune to remove it)"
        )
    if data.get("split_documents"):
        named = data["split_sources"]
        print(split_note(named, data["split_documents"] - len(named)))
    print_metadata(data.get("metadata", []), data.get("metadata_left_out", 0), limit=20)
    print_skipped_forms(data["skipped_files"], data["skipped_documents"])


def _lexical_figures(data: dict[str, Any]) -> str:
    """The collection's BM25 figures, when the summary has them: a service's does not
    (they count other tenants' chunks: docs/service.md)."""
    if "bm25_avgdl" not in data:
        return ""
    reencoded = data["sparse_reencoded"]
    return f"; BM25 average length {data['bm25_avgdl'] or 0:.1f} terms" + (
        f" ({reencoded} stored BM25 vectors re-encoded: the corpus's average chunk length"
        " drifted past the tolerance)"
        if reencoded
        else ""
    )


def tenant_name(tenant: str | None) -> str:
    return "(untenanted)" if tenant is None else tenant

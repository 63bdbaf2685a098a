"""Corpus commands: ``chunks`` (preview), ``ingest`` and ``status``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from typing import Annotated, Any

import typer

from ragwright.adapters.sources import SkippedDocument
from ragwright.cli.common import (
    AsJson,
    DocState,
    DocType,
    MaxTokens,
    MaxWords,
    NoOverlap,
    Policy,
    Sources,
    _documents,
    _Progress,
    _settings,
    app,
)
from ragwright.core.chunking import build_chunks
from ragwright.core.points import LIVE
from ragwright.settings import load_settings


@app.command()
def chunks(
    sources: Sources,
    max_words: MaxWords = None,
    max_tokens: MaxTokens = None,
    no_overlap: NoOverlap = False,
    policy: Policy = None,
    doc_type: DocType = None,
    state: DocState = None,
    as_json: AsJson = False,
) -> None:
    """Preview the chunks SOURCES produce. Needs no index and no embedding provider
    (with --max-tokens it loads the bundled model's tokenizer to count)."""
    settings = _settings(max_words, no_overlap, policy, max_tokens)
    chunking = settings.chunking_policy()
    embedder = None
    if chunking.max_tokens is not None:
        from ragwright.pipeline.ingest import token_counter
        from ragwright.runtime import open_embedder

        embedder = open_embedder(settings)
    rows = []
    for document in _documents(sources, settings, doc_type, state):
        counter = token_counter(embedder, document) if embedder is not None else None
        for chunk in build_chunks(document, chunking, count_tokens=counter):
            rows.append(
                {
                    "document_id": chunk.document_id,
                    "chunk_id": chunk.chunk_id,
                    "point_id": str(chunk.point_id),
                    "section_id": chunk.section_id,
                    "chunking_version": chunk.chunking_version,
                    "word_count": chunk.word_count,
                    "document_type": document.document_type,
                    "publication_state": document.publication_state,
                    "paragraphs": list(chunk.positions.paragraph_indexes),
                    "text": chunk.text,
                }
            )
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for row in rows:
        print(
            f"{row['document_id']}/{row['chunk_id']} ({row['word_count']} words) "
            f"[{row['document_type']}, {row['publication_state']}] {row['chunking_version']}"
        )
        print(f"point {row['point_id']}")
        print(row["text"])
        print()
    print(f"{len(rows)} chunks, {chunking.version}")


@app.command()
def ingest(
    sources: Sources,
    prune: Annotated[
        bool, typer.Option("--prune", help="Delete indexed documents missing from SOURCES.")
    ] = False,
    max_words: MaxWords = None,
    max_tokens: MaxTokens = None,
    no_overlap: NoOverlap = False,
    policy: Policy = None,
    doc_type: DocType = None,
    state: DocState = None,
    add_chunking_version: Annotated[
        bool,
        typer.Option(
            "--add-chunking-version",
            help="Allow writing a chunking version the collection does not hold yet.",
        ),
    ] = False,
    skip_invalid: Annotated[
        bool,
        typer.Option(
            "--skip-invalid",
            help="Leave out BEIR corpus documents that break a rule (e.g. empty text); "
            "each is listed in the summary. Markdown and JSON sources always fail.",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Index SOURCES: chunk, embed what changed, upsert, switch, verify.

    Prints a summary: documents, chunks, embedded, unchanged, payload_updated,
    deleted, verified. Re-running on unchanged input embeds and writes nothing.
    """
    from ragwright.pipeline.ingest import ingest as run_ingest
    from ragwright.runtime import (
        embedding_profile,
        open_embedder,
        open_index,
        open_sparse_encoder,
    )

    settings = _settings(max_words, no_overlap, policy, max_tokens)
    skipped: list[SkippedDocument] = []
    documents = _documents(
        sources, settings, doc_type, state, skipped.append if skip_invalid else None
    )
    profile = embedding_profile(settings)
    embedder = open_embedder(settings)
    index = open_index(settings, profile, add_chunking_version=add_chunking_version)
    try:
        with _Progress(enabled=sys.stderr.isatty() and not as_json) as bar:
            report = run_ingest(
                documents,
                policy=settings.chunking_policy(),
                embedder=embedder,
                sparse_encoder=open_sparse_encoder(settings),
                index=index,
                prune=prune,
                batch_size=settings.batch_size,
                progress=bar,
            )
    finally:
        index.close()
    summary = asdict(report)
    summary["chunking_version"] = settings.chunking_policy().version
    summary["embedding_profile"] = profile.profile_id
    summary["skipped"] = [asdict(s) for s in skipped]
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(
        f"{report.documents} documents, {report.chunks} chunks ({summary['chunking_version']}, "
        f"{profile.profile_id}): {report.embedded} embedded, {report.unchanged} unchanged, "
        f"{report.payload_updated} payload updated, {report.deleted} deleted, "
        f"{report.verified} verified"
    )
    for s in skipped:
        print(f"skipped document {s.document_id!r} ({s.source}): {s.field}: {s.reason}")


@app.command()
def status(as_json: AsJson = False) -> None:
    """List what the index holds: documents, chunks, types, states, versions."""
    from ragwright.core.points import read_payload
    from ragwright.runtime import embedding_profile, open_index

    settings = load_settings()
    index = open_index(
        settings, embedding_profile(settings), write=False, any_chunking_version=True
    )
    try:
        per_document: dict[tuple[str, str], dict[str, Any]] = {}
        states: Counter[str] = Counter()
        for point in index.scroll():
            payload = read_payload(point.point_id, point.payload)
            states[payload.index_state] += 1
            key = (payload.document_id, payload.chunking_version)
            row = per_document.setdefault(
                key,
                {
                    "document_id": payload.document_id,
                    "title": payload.title,
                    "document_type": payload.document_type,
                    "publication_state": payload.publication_state,
                    "chunking_version": payload.chunking_version,
                    "tenant": payload.tenant,
                    "live_chunks": 0,
                    "staged_chunks": 0,
                },
            )
            row["live_chunks" if payload.index_state == LIVE else "staged_chunks"] += 1
        rows = sorted(
            per_document.values(), key=lambda r: (r["chunking_version"], r["document_id"])
        )
        contract = index.contract
    finally:
        index.close()
    if as_json:
        print(
            json.dumps(
                {
                    "collection": settings.collection,
                    "documents": rows,
                    "points": dict(states),
                    "embedding_profile": contract.profile_id,
                    "chunking_versions": list(contract.chunking_versions),
                },
                indent=2,
            )
        )
        return
    print(
        f"collection {settings.collection} "
        f"({contract.profile_id}, {contract.dimensions} dims, {contract.distance})"
    )
    for row in rows:
        print(
            f"  {row['document_id']:<40} {row['document_type']:<8} {row['publication_state']:<10} "
            f"{row['live_chunks']:>3} chunks  {row['title']}"
        )
    print(f"{len(rows)} documents, {sum(states.values())} points ({dict(states)})")

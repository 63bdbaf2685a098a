"""Corpus commands: ``chunks`` (preview), ``ingest``, ``status`` and ``verify``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from ragwright.cli.common import (
    AsJson,
    DocState,
    DocType,
    MaxTokens,
    MaxWords,
    NoOverlap,
    Policy,
    ShowProgress,
    SkipInvalid,
    Sources,
    app,
    application,
    check_choice,
    plural,
    print_json,
)
from ragwright.cli.corpus_text import (
    print_ingest_summary,
    print_metadata,
    print_skipped,
    split_note,
)

if TYPE_CHECKING:
    from ragwright.application import ChunkingOptions, IngestRequest

CHUNKING_POLICIES = ("section-paragraphs", "sentence-blocks")


def _chunking(
    policy: str | None, max_words: int | None, max_tokens: int | None, no_overlap: bool
) -> ChunkingOptions:
    from ragwright.application import ChunkingOptions

    if policy is not None:
        check_choice(policy, CHUNKING_POLICIES, "--policy")
    kind = cast(Literal["section-paragraphs", "sentence-blocks"] | None, policy)
    return ChunkingOptions(
        policy=kind,
        max_words=max_words,
        max_tokens=max_tokens,
        overlap=False if no_overlap else None,
    )


@app.command()
def chunks(
    sources: Sources,
    max_words: MaxWords = None,
    max_tokens: MaxTokens = None,
    no_overlap: NoOverlap = False,
    policy: Policy = None,
    doc_type: DocType = None,
    state: DocState = None,
    skip_invalid: SkipInvalid = False,
    as_json: AsJson = False,
) -> None:
    """Preview the chunks SOURCES produce (with the pages of PDF chunks), and where each
    file's metadata came from. Needs no index; it loads the embedding model's tokenizer
    to hold every chunk to the model's input limit. Chunks marked "split" hold a
    paragraph cut at sentence boundaries to fit."""
    from ragwright.application import ChunksRequest

    result = application().chunks(
        ChunksRequest(
            sources=tuple(sources),
            chunking=_chunking(policy, max_words, max_tokens, no_overlap),
            document_type=doc_type,
            publication_state=state,
            skip_invalid=skip_invalid,
        )
    )
    if as_json:
        print_json(result.to_dict()["chunks"])
        return
    for row in result.chunks:
        print(
            f"{row.document_id}/{row.chunk_id} ({plural(row.word_count, 'word')}) "
            f"[{row.document_type}, {row.publication_state}] {row.chunking_version}"
            + (", split at sentences" if row.split else "")
            + (f" ({row.location})" if row.location else "")
        )
        print(f"point {row.point_id}")
        print(row.text)
        print()
    print(f"{plural(len(result.chunks), 'chunk')}, {result.chunking_version}")
    split = sorted({row.document_id for row in result.chunks if row.split})
    if split:
        print(split_note(split))
    data = result.to_dict()
    print_metadata(data["metadata"], data["metadata_left_out"])
    print_skipped(result.skipped_files, result.skipped_documents)


@app.command()
def ingest(
    sources: Sources,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Delete indexed documents missing from SOURCES, of the run's tenants only.",
        ),
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
    skip_invalid: SkipInvalid = False,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            metavar="TENANT",
            help="Tenant of the documents whose files name none; the run then changes "
            "and prunes only TENANT's documents (and those of tenants files name).",
        ),
    ] = None,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="Empty the collection and index SOURCES again (recovers a damaged index; "
            "refused when SOURCES hold no documents or an invalid one).",
        ),
    ] = False,
    progress: ShowProgress = False,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            metavar="URL",
            help="Send the documents to a running 'ragwright serve' at URL instead (key in "
            "RAGWRIGHT_API_KEY, scope ingest; the tenant is the key's; the service chunks "
            "and embeds with its own settings).",
        ),
    ] = None,
    queue: Annotated[
        bool,
        typer.Option(
            "--queue",
            help="Validate here, then put the changed documents on the shared queue in "
            "work items for 'ragwright ingest-worker' processes (RAGWRIGHT_DATABASE_URL; "
            "a Qdrant server: RAGWRIGHT_BACKEND=qdrant) and wait for them.",
        ),
    ] = False,
    item_size: Annotated[
        int | None,
        typer.Option(
            "--item-size",
            min=1,
            metavar="N",
            help="Documents per work item (with --queue; default 64).",
        ),
    ] = None,
    local_workers: Annotated[
        int,
        typer.Option(
            "--local-workers",
            min=0,
            metavar="N",
            help="Also start N ingest-worker processes on this machine (with --queue).",
        ),
    ] = 0,
    as_json: AsJson = False,
) -> None:
    """Index SOURCES: chunk, embed what changed, upsert, switch, verify.

    A document is its tenant and its id: a run changes, and --prune deletes, only
    documents of the tenants it ingests. Files that give no type or state are published
    runbooks (shown as "default"), what ask and search read by default. Prints a summary:
    documents, chunks, embedded, unchanged, payload updated, deleted, verified, the scope
    (tenants, sources), ids other tenants also hold, the documents whose long paragraphs
    were split at sentences to fit, where each file's metadata came from, and the files
    under SOURCES that were left out and why (unreadable files of a folder always are).
    Re-running on unchanged input embeds and writes nothing.
    """
    from ragwright.application import IngestRequest
    from ragwright.cli.progress import ProgressDisplay

    request = IngestRequest(
        sources=tuple(sources),
        chunking=_chunking(policy, max_words, max_tokens, no_overlap),
        document_type=doc_type,
        publication_state=state,
        prune=prune,
        add_chunking_version=add_chunking_version,
        skip_invalid=skip_invalid,
        tenant=tenant,
        rebuild=rebuild,
    )
    if not queue and (local_workers or item_size is not None):
        raise typer.BadParameter(
            "--item-size and --local-workers go with --queue", param_hint="--queue"
        )
    if server is not None:
        if queue:
            raise typer.BadParameter("--queue cannot be used with --server", param_hint="--queue")
        data = _ingest_remotely(server, request)
    elif queue:
        from ragwright.application.ingest_queue import DEFAULT_ITEM_SIZE
        from ragwright.cli.serve import log_to_stderr
        from ragwright.cli.workers import local_workers as start_workers

        log_to_stderr()  # the run id and its item count, for the operator and the workers

        with (
            start_workers(local_workers, idle_exit=60.0) as started,
            ProgressDisplay(force_lines=progress) as display,
        ):
            data = (
                application()
                .ingest_queued(
                    request,
                    item_size=item_size or DEFAULT_ITEM_SIZE,
                    progress=display,
                    started=started if local_workers else None,
                )
                .to_dict()
            )
    else:
        with ProgressDisplay(force_lines=progress) as display:
            # A large run reads its sources and plans its slices in forked children
            # (pipeline/source_process, pipeline/planning_process).
            data = application().ingest(request, progress=display, planning_process=True).to_dict()
    if as_json:
        print_json(data)
        return
    print_ingest_summary(data, server)


def _ingest_remotely(server: str, request: IngestRequest) -> dict[str, Any]:
    """Read and validate the documents here, send them to the service, return its
    summary. Options the service decides are refused rather than ignored."""
    import os

    from ragwright.service.client import submit_ingestion

    refused = [
        name
        for name, used in (
            ("--tenant", request.tenant is not None),
            ("--rebuild", request.rebuild),
            ("--add-chunking-version", request.add_chunking_version),
            ("--policy/--max-words/--max-tokens/--no-overlap", request.chunking.overridden),
        )
        if used
    ]
    if refused:
        raise typer.BadParameter(
            f"{refused[0]} cannot be used with --server: the service decides it (the tenant "
            "is the API key's; chunking follows the service's settings)",
            param_hint="--server",
        )
    key = os.environ.get("RAGWRIGHT_API_KEY", "").strip()
    if not key:
        raise typer.BadParameter(
            "set RAGWRIGHT_API_KEY to an API key with the ingest scope ('ragwright keys add')",
            param_hint="--server",
        )
    loaded = application().load_documents(request)
    print_skipped(loaded.skipped, loaded.invalid)
    data = submit_ingestion(server, key, loaded.documents, prune=request.prune)
    data["sources"] = [str(path) for path in request.sources]
    return data


@app.command()
def status(as_json: AsJson = False) -> None:
    """List what the index holds: documents, chunks, types, states, every chunking
    version (marking the one queries use) and the persisted calibration, if any."""
    app_ = application()
    result = app_.status()
    if as_json:
        print_json(result.to_dict())
        return
    print(
        f"collection {result.collection} "
        f"({result.embedding_profile}, {result.dimensions} dims, {result.distance})"
    )
    print("chunking versions:")
    for version in result.versions:
        mark = "  <- queries use this" if version.queried else ""
        print(
            f"  {version.chunking_version}: {plural(version.documents, 'document')}, "
            f"{plural(version.live_chunks, 'live chunk')}{mark}"
        )
    if not any(v.queried for v in result.versions):
        print(
            f"  queries use {result.query_chunking_version}, which holds nothing: change the "
            "chunking settings or pass --chunking-version to search and ask"
        )
    rows: list[dict[str, Any]] = [
        {
            "id": d.document_id,
            "type": d.document_type,
            "state": d.publication_state,
            "tenant": d.tenant or "-",
            "chunks": str(d.live_chunks)
            + (f" (+{d.staged_chunks} staged)" if d.staged_chunks else ""),
            "version": d.chunking_version,
            "title": d.title,
        }
        for d in result.documents
    ]
    if rows:
        columns = ("id", "type", "state", "tenant", "chunks", "version")
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
        print("  ".join(c.upper().ljust(widths[c]) for c in columns) + "  TITLE")
        for row in rows:
            print("  ".join(row[c].ljust(widths[c]) for c in columns) + "  " + row["title"])
    points = ", ".join(f"{count} {state}" for state, count in sorted(result.points.items()))
    total = sum(result.points.values())
    print(
        f"{plural(len({(d.tenant, d.document_id) for d in result.documents}), 'document')}, "
        f"{plural(total, 'point')}" + (f" ({points})" if points else "")
    )
    calibration = result.calibration
    if calibration is None:
        print("calibration: none")
    else:
        legs = [
            f"{leg} {value:.4f}"
            for leg, value in (
                ("dense", calibration.threshold_dense),
                ("sparse", calibration.threshold_sparse),
                ("answerability", calibration.answerability_threshold),
            )
            if value is not None
        ]
        print(
            f"calibration: {calibration.calibrated_at}, {', '.join(legs) or 'no threshold'} "
            f"({calibration.mode}, K={calibration.k}) on {calibration.dataset} "
            f"(sha256 {calibration.dataset_sha256[:12]})"
        )
    if calibration is None or calibration.answerability_threshold is None:
        # What ask declines by before a calibration: the embedding profile's default.
        threshold, source = app_.answerability_threshold()
        calibrate = (
            "calibrate on your own labelled questions (answerable ones and at least 20 the "
            "documents do not answer; docs/evaluation.md): "
            "ragwright eval calibrate CASES.jsonl --write"
        )
        if source == "settings":
            print(
                f"answerability threshold: {threshold:.4f} "
                "(setting RAGWRIGHT_ANSWERABILITY_THRESHOLD)"
            )
        elif threshold is not None:
            print(
                f"answerability threshold: {threshold:.4f}, the embedding profile's "
                f"uncalibrated default (measured on public questions, not yours); {calibrate}"
            )
        else:
            print(
                "answerability threshold: none (the embedding profile has no measured "
                f"default: ask declines nothing for want of a close sentence); {calibrate}"
            )


@app.command()
def verify(as_json: AsJson = False) -> None:
    """Read every point of the index back (payload, dense and sparse vectors) and
    compare the count with the last commit. Exits 1 when anything is damaged."""
    result = application().verify()
    if as_json:
        print_json(result.to_dict())
    else:
        committed = "unknown" if result.committed_points is None else result.committed_points
        print(
            f"collection {result.collection}: {plural(result.points, 'point')} "
            f"({committed} committed), {result.checked} read back valid, "
            f"{plural(len(result.problems), 'problem')}"
        )
        for problem in result.problems:
            print(f"  {problem.point_id or 'index'}: {problem.part}: {problem.detail}")
        if result.damaged:
            print("recover with 'ragwright ingest SOURCES --rebuild'")
    if result.damaged:
        raise typer.Exit(1)

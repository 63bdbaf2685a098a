"""The ``ragwright`` command.

Exit status: 0 success, 1 invalid input or configuration (the error goes to stderr and
nothing already stored is lost), 2 usage errors (from the argument parser).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragwright import __version__
from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.chunking import build_chunks
from ragwright.core.points import LIVE
from ragwright.errors import RagwrightError
from ragwright.settings import Settings, load_settings
from ragwright.types import SourceDocument

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Answer questions from your own documents with evidence you can check.",
)
_err = Console(stderr=True)

Sources = Annotated[
    list[Path], typer.Argument(help="Markdown/JSON files, BEIR corpus.jsonl, or directories.")
]
MaxWords = Annotated[
    int | None,
    typer.Option(
        "--max-words", min=1, help="Word budget per chunk, heading included (default 80)."
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        help="Token ceiling per embedding input, counted by the embedding model's tokenizer.",
    ),
]
NoOverlap = Annotated[
    bool, typer.Option("--no-overlap", help="Do not repeat a paragraph across windows.")
]
Policy = Annotated[
    str | None,
    typer.Option(
        "--policy",
        help="section-paragraphs (refuses oversize paragraphs) or sentence-blocks "
        "(splits them at sentence/line boundaries) (default section-paragraphs).",
    ),
]
DocType = Annotated[
    str | None, typer.Option("--type", help="document_type for files that do not set it.")
]
DocState = Annotated[
    str | None, typer.Option("--state", help="publication_state for files that do not set it.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _settings(
    max_words: int | None, no_overlap: bool, policy: str | None, max_tokens: int | None = None
) -> Settings:
    overrides: dict[str, Any] = {}
    if max_words is not None:
        overrides["max_words"] = max_words
    if max_tokens is not None:
        overrides["max_tokens"] = max_tokens
    if no_overlap:
        overrides["overlap"] = False
    if policy is not None:
        overrides["chunking"] = policy
    return load_settings(**overrides)


def _documents(
    sources: list[Path], settings: Settings, doc_type: str | None, state: str | None
) -> list[SourceDocument]:
    defaults = SourceDefaults(
        document_type=doc_type, publication_state=state, document_types=settings.document_types
    )
    return load_sources(sources, defaults)


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
    documents = _documents(sources, settings, doc_type, state)
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
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(
        f"{report.documents} documents, {report.chunks} chunks ({summary['chunking_version']}, "
        f"{profile.profile_id}): {report.embedded} embedded, {report.unchanged} unchanged, "
        f"{report.payload_updated} payload updated, {report.deleted} deleted, "
        f"{report.verified} verified"
    )


@app.command()
def search(
    question: Annotated[str, typer.Argument(help="The question to find evidence for.")],
    k: Annotated[int, typer.Option("--k", min=1, max=1000, help="Number of results.")] = 5,
    mode: Annotated[
        str, typer.Option("--mode", help="dense, sparse (BM25) or hybrid (RRF of both).")
    ] = "hybrid",
    types: Annotated[
        list[str] | None, typer.Option("--type", help="Eligible document type (repeatable).")
    ] = None,
    states: Annotated[
        list[str] | None,
        typer.Option("--state", help="Eligible publication state (repeatable)."),
    ] = None,
    documents: Annotated[
        list[str] | None, typer.Option("--document", help="Restrict to document id (repeatable).")
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant", help="Caller's tenant (trusted context; default: untenanted only)."
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Find the best eligible chunks for QUESTION (default: published runbooks).

    Eligibility is part of the query: drafts or other types never fill the result, and
    an empty result means no eligible evidence (conditions are never relaxed).
    """
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.retrieve import MODES
    from ragwright.runtime import embedding_profile, open_index, open_retriever

    if mode not in MODES:
        raise typer.BadParameter(f"must be one of {', '.join(MODES)}", param_hint="--mode")
    settings = load_settings()
    eligibility = Eligibility(
        chunking_version=settings.chunking_policy().version,
        document_types=tuple(types or ("runbook",)),
        publication_states=tuple(states or ("published",)),
        document_ids=tuple(documents or ()),
    )
    index = open_index(settings, embedding_profile(settings), write=False)
    try:
        retriever = open_retriever(settings, index)
        result = retriever.search(question, eligibility, CallerScope(tenant=tenant), k=k, mode=mode)
    finally:
        index.close()
    if as_json:
        rows = [
            {
                "document_id": h.payload.document_id,
                "chunk_id": h.payload.chunk_id,
                "chunking_version": h.payload.chunking_version,
                "document_type": h.payload.document_type,
                "publication_state": h.payload.publication_state,
                "score": h.score,
                "text": h.payload.text,
            }
            for h in result.hits
        ]
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if result.no_eligible_evidence:
        print("No eligible evidence: nothing matched the required conditions.")
        return
    for rank, hit in enumerate(result.hits, start=1):
        p = hit.payload
        print(
            f"{rank}. {p.document_id}/{p.chunk_id} [{p.chunking_version}] "
            f"({p.document_type}, {p.publication_state}) score {hit.score:.4f}"
        )
        print(p.text)
        print()


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer from the documents.")],
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="Retrieved candidates.")] = 5,
    policy: Annotated[
        str, typer.Option("--policy", help="Context assembly policy.")
    ] = "seed-baseline",
    types: Annotated[
        list[str] | None, typer.Option("--type", help="Eligible document type (repeatable).")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Caller's tenant.")] = None,
    preview: Annotated[
        bool, typer.Option("--preview", help="Stop before the model: show the exact message.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check-support", help="Flag citations whose text does not contain the claims."
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Answer QUESTION from published evidence with the configured chat model.

    Retrieves eligible chunks, assembles them within the token budget, asks the model for
    a schema-constrained answer, validates it and resolves its citations. With no
    eligible evidence, no model is called.
    """
    import asyncio

    from ragwright.adapters.tokenizer import O200kCounter
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.answer import answer_question
    from ragwright.runtime import (
        build_chat_pipeline,
        embedding_profile,
        open_chat_provider,
        open_index,
        open_retriever,
    )

    settings = load_settings()
    counter = O200kCounter(settings.home / "tokenizers")
    eligibility = Eligibility(
        chunking_version=settings.chunking_policy().version,
        document_types=tuple(types or ("runbook",)),
    )
    index = open_index(settings, embedding_profile(settings), write=False)
    release = None
    try:
        retriever = open_retriever(settings, index)
        chat = None
        if not preview:
            provider, release = open_chat_provider(settings)
            chat = build_chat_pipeline(settings, [provider], count_tokens=counter.count)
        result = asyncio.run(
            answer_question(
                question,
                retriever=retriever,
                eligibility=eligibility,
                scope=CallerScope(tenant=tenant),
                chat=chat,
                counter=counter,
                k=k,
                policy=policy,
                preview=preview,
            )
        )
    finally:
        index.close()
        if release is not None:
            release()
    context = result.context
    decisions = [
        {
            "document_id": d.document_id,
            "chunk_id": d.chunk_id,
            "chunking_version": d.chunking_version,
            "outcome": d.outcome,
            "label": d.label,
            "removed_paragraphs": d.removed_paragraphs,
        }
        for d in context.decisions
    ]
    sources = [
        {
            "label": s.label,
            "document_id": s.candidate.document_id,
            "chunk_id": s.candidate.chunk_id,
            "chunking_version": s.candidate.chunking_version,
        }
        for s in context.sources
    ]
    usage = (
        {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens}
        if result.usage
        else None
    )
    if as_json:
        out: dict[str, Any] = {
            "status": result.status,
            "answer": result.answer,
            "citations": [c.label for c in result.citations],
            "sources": sources,
            "decisions": decisions,
            "input_tokens": context.input_tokens,
            "policy": context.policy,
            "usage": usage,
            "model": result.model,
        }
        if preview:
            out["user_message"] = context.user_message
        if result.support is not None:
            out["support"] = {
                "flagged": result.support.flagged,
                "citations": [asdict(c) for c in result.support.citations],
                "unsupported_sentences": list(result.support.unsupported_sentences),
            }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    if result.status == "no_eligible_evidence":
        print("No eligible evidence: nothing was sent to the model.")
    elif preview:
        print(context.user_message)
    else:
        print(f"[{result.status}] {result.answer or '(the evidence is insufficient)'}")
        for citation in result.citations:
            where = f"{citation.document_id}/{citation.chunk_id}"
            print(f"  {citation.label}: {where} [{citation.chunking_version}]")
        if result.support is not None:
            verdict = "FLAGGED" if result.support.flagged else "ok"
            print(f"support check: {verdict}")
    print("decisions:")
    for d in decisions:
        label = f" {d['label']}" if d["label"] else ""
        where = f"{d['document_id']}/{d['chunk_id']}"
        print(f"  {where}: {d['outcome']}{label} (removed {d['removed_paragraphs']})")
    used = f"{usage['input_tokens']} in / {usage['output_tokens']} out" if usage else "unknown"
    print(f"input tokens (o200k_base estimate): {context.input_tokens}; provider usage: {used}")


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


eval_app = typer.Typer(
    no_args_is_help=True, help="Evaluate retrieval on labelled questions; compare and report runs."
)
app.add_typer(eval_app, name="eval")


def _code_revision() -> str:
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return f"ragwright {__version__}"
    return done.stdout.strip() or f"ragwright {__version__}"


@eval_app.command("run")
def eval_run(
    dataset: Annotated[
        Path | None, typer.Argument(help="JSONL dataset (docs/evaluation.md); omit with --beir.")
    ] = None,
    beir: Annotated[
        Path | None, typer.Option("--beir", help="BEIR directory: document-level evaluation.")
    ] = None,
    split: Annotated[str, typer.Option("--split", help="BEIR qrels split.")] = "test",
    mode: Annotated[str, typer.Option("--mode", help="dense, sparse or hybrid.")] = "hybrid",
    ks: Annotated[str, typer.Option("--k", help="Cutoffs, comma-separated.")] = "1,3,5,10",
    types: Annotated[
        list[str] | None, typer.Option("--type", help="Eligible document type (repeatable).")
    ] = None,
    states: Annotated[
        list[str] | None, typer.Option("--state", help="Eligible publication state (repeatable).")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Caller's tenant.")] = None,
    threshold_dense: Annotated[float | None, typer.Option(help="Minimum dense score.")] = None,
    threshold_sparse: Annotated[float | None, typer.Option(help="Minimum BM25 score.")] = None,
    threshold_fusion: Annotated[float | None, typer.Option(help="Minimum RRF score.")] = None,
    threshold_rerank: Annotated[float | None, typer.Option(help="Minimum rerank score.")] = None,
    with_text: Annotated[
        bool, typer.Option("--with-text", help="Store chunk texts in the run.")
    ] = False,
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    as_json: AsJson = False,
) -> None:
    """Run an evaluation and persist it under RAGWRIGHT_HOME/evaluations/<execution-id>/."""
    import hashlib

    from ragwright.adapters.datasets import load_beir_cases, load_cases
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus, run_evaluation, save_run
    from ragwright.pipeline.retrieve import MODES, Thresholds
    from ragwright.runtime import embedding_profile, lexical_profile, open_index, open_retriever

    source = beir if beir is not None else dataset
    if source is None or (dataset is not None and beir is not None):
        raise typer.BadParameter("give a DATASET or --beir DIR, not both", param_hint="DATASET")
    if mode not in MODES:
        raise typer.BadParameter(f"must be one of {', '.join(MODES)}", param_hint="--mode")
    try:
        cutoffs = tuple(int(k) for k in ks.split(","))
    except ValueError as error:
        raise typer.BadParameter(
            "comma-separated integers, e.g. 1,3,5,10", param_hint="--k"
        ) from error
    cases = load_beir_cases(source, split) if beir is not None else load_cases(source)
    fingerprint_path = source / "qrels" / f"{split}.tsv" if beir is not None else source
    settings = load_settings()
    profile = embedding_profile(settings)
    eligibility = Eligibility(
        chunking_version=settings.chunking_policy().version,
        document_types=tuple(types or ("runbook",)),
        publication_states=tuple(states or ("published",)),
    )
    config = EvalConfig(
        eligibility=eligibility,
        scope=CallerScope(tenant=tenant),
        mode=mode,
        ks=cutoffs,
        thresholds=Thresholds(
            threshold_dense, threshold_sparse, threshold_fusion, threshold_rerank
        ),
        with_text=with_text,
    )
    index = open_index(settings, profile, write=False)
    try:
        retriever = open_retriever(settings, index)
        retriever.candidates = max(
            retriever.candidates, max(cutoffs) * config.document_depth_factor
        )
        corpus = eligible_corpus(index, eligibility, config.scope)
        record = run_evaluation(
            cases,
            retriever,
            config,
            corpus,
            run_config={
                "dataset": str(source),
                "dataset_sha256": hashlib.sha256(fingerprint_path.read_bytes()).hexdigest(),
                "embedding_profile": profile.profile_id,
                "model_digest": profile.artifact_digest,
                "lexical_profile": lexical_profile(settings).profile_id,
                "chunking_version": eligibility.chunking_version,
                "rrf_k": settings.rrf_k,
                "rrf_weights": list(settings.rrf_weights),
                "reranker": settings.reranker,
                "collection": settings.collection,
                "code_revision": _code_revision(),
            },
        )
    finally:
        index.close()
    directory = save_run(record, settings.home)
    if report:
        from ragwright.report import render_report

        (directory / "report.html").write_text(render_report(record.to_json()), "utf-8")
    if as_json:
        print(
            json.dumps(
                {
                    "execution_id": record.execution_id,
                    "path": str(directory),
                    "summary": record.summary,
                    "categories": record.categories,
                    "unsupported": {k: v for k, v in record.unsupported.items() if k != "results"},
                },
                indent=2,
            )
        )
        return
    _print_summary(record.execution_id, record.summary, record.unsupported)
    print(
        f"saved {directory / 'run.json'}" + (f" and {directory / 'report.html'}" if report else "")
    )


def _print_summary(execution_id: str, summary: dict[str, Any], unsupported: dict[str, Any]) -> None:
    print(f"evaluation {execution_id}: {summary['cases']} answerable cases")
    print(f"  {'K':>4} {'P@K':>7} {'R@K':>7} {'RR@K':>7} {'nDCG@K':>7}")
    for k, m in summary["K"].items():
        print(
            f"  {k:>4} {m['precision']:7.3f} {m['recall']:7.3f} "
            f"{m['reciprocal_rank']:7.3f} {m['ndcg']:7.3f}"
        )
    if unsupported.get("cases"):
        print(
            f"  unsupported: {unsupported['accepted']}/{unsupported['cases']} accepted "
            f"(false-acceptance rate {unsupported['false_acceptance_rate']:.3f})"
        )


@eval_app.command("compare")
def eval_compare(
    before: Annotated[str, typer.Argument(help="Execution id or path of the earlier run.")],
    after: Annotated[str, typer.Argument(help="Execution id or path of the later run.")],
    k: Annotated[int, typer.Option("--k", min=1, help="Cutoff to compare.")] = 10,
    metric: Annotated[
        str, typer.Option("--metric", help="precision, recall, reciprocal_rank or ndcg.")
    ] = "ndcg",
    as_json: AsJson = False,
) -> None:
    """List per-case regressions and improvements from BEFORE to AFTER."""
    from ragwright.pipeline.evaluate import compare_runs, load_run

    settings = load_settings()
    regressions, improvements, notes = compare_runs(
        load_run(before, settings.home), load_run(after, settings.home), k=k, metric=metric
    )
    if as_json:
        print(
            json.dumps(
                {
                    "regressions": [asdict(c) for c in regressions],
                    "improvements": [asdict(c) for c in improvements],
                    "notes": notes,
                },
                indent=2,
            )
        )
        return
    for note in notes:
        print(f"note: {note}")
    print(f"{len(regressions)} regressions, {len(improvements)} improvements ({metric}@{k})")
    for label, changes in (("regressed", regressions), ("improved", improvements)):
        for change in changes:
            print(f"  {label:<9} {change.case_id}: {change.before:.3f} -> {change.after:.3f}")


@eval_app.command("report")
def eval_report(
    run: Annotated[str, typer.Argument(help="Execution id or path of a run.")],
) -> None:
    """Write report.html for a persisted run and print its path."""
    from ragwright.pipeline.evaluate import load_run
    from ragwright.report import render_report

    settings = load_settings()
    data = load_run(run, settings.home)
    target = settings.home / "evaluations" / data["execution_id"] / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(data), "utf-8")
    print(target)


class _Progress:
    """A rich progress bar fed by ingestion events; silent when not on a terminal."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_err,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()

    def __call__(self, event: str, count: int) -> None:
        if not self.enabled:
            return
        if event == "plan":
            self._task = self._bar.add_task("chunks", total=count)
        elif self._task is not None and event in ("unchanged", "embedded"):
            self._bar.advance(self._task, count)


def version_callback(value: bool) -> None:
    if value:
        print(f"ragwright {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Answer questions from your own documents with evidence you can check."""


def main() -> None:
    """Entry point: usage errors exit 2 (the parser's message), ragwright errors exit 1
    with one line on stderr; nothing already stored is touched by either."""
    try:
        app()
    except RagwrightError as error:
        _err.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)

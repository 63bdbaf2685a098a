"""Evaluation commands: ``eval run``, ``eval compare`` and ``eval report``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from ragwright import __version__
from ragwright.cli.common import (
    AsJson,
    CallerTenant,
    EligibleStates,
    EligibleTypes,
    eval_app,
)
from ragwright.settings import load_settings


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
    types: EligibleTypes = None,
    states: EligibleStates = None,
    tenant: CallerTenant = None,
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

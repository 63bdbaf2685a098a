"""Evaluation commands: ``eval run``, ``eval calibrate``, ``eval compare`` and ``eval report``."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragwright import __version__
from ragwright.cli.common import (
    AsJson,
    CallerTenant,
    EligibleStates,
    EligibleTypes,
    _Progress,
    eval_app,
)
from ragwright.settings import Settings, load_settings

if TYPE_CHECKING:
    from ragwright.pipeline.evaluate import EligibleCorpus, EvalConfig
    from ragwright.pipeline.retrieve import Retriever, Thresholds
    from ragwright.types import EvalCase


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


Dataset = Annotated[
    Path | None, typer.Argument(help="JSONL dataset (docs/evaluation.md); omit with --beir.")
]
Beir = Annotated[
    Path | None, typer.Option("--beir", help="BEIR directory: document-level evaluation.")
]
Split = Annotated[str, typer.Option("--split", help="BEIR qrels split.")]
ModeOption = Annotated[str, typer.Option("--mode", help="dense, sparse or hybrid.")]


@dataclass
class _Setup:
    """What ``eval run`` and ``eval calibrate`` share: cases, config, index and corpus."""

    source: Path
    fingerprint_path: Path
    cases: list[EvalCase]
    config: EvalConfig
    retriever: Retriever
    corpus: EligibleCorpus


@contextmanager
def _evaluation(
    settings: Settings,
    dataset: Path | None,
    beir: Path | None,
    split: str,
    mode: str,
    cutoffs: tuple[int, ...],
    types: list[str] | None,
    states: list[str] | None,
    tenant: str | None,
    thresholds: Thresholds,
    with_text: bool = False,
) -> Iterator[_Setup]:
    from ragwright.adapters.datasets import load_beir_cases, load_cases
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.evaluate import EvalConfig, eligible_corpus
    from ragwright.pipeline.retrieve import MODES
    from ragwright.runtime import embedding_profile, open_index, open_retriever

    source = beir if beir is not None else dataset
    if source is None or (dataset is not None and beir is not None):
        raise typer.BadParameter("give a DATASET or --beir DIR, not both", param_hint="DATASET")
    if mode not in MODES:
        raise typer.BadParameter(f"must be one of {', '.join(MODES)}", param_hint="--mode")
    cases = load_beir_cases(source, split) if beir is not None else load_cases(source)
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
        thresholds=thresholds,
        with_text=with_text,
    )
    index = open_index(settings, embedding_profile(settings), write=False)
    try:
        retriever = open_retriever(settings, index)
        retriever.candidates = max(
            retriever.candidates, max(cutoffs) * config.document_depth_factor
        )
        yield _Setup(
            source=source,
            fingerprint_path=source / "qrels" / f"{split}.tsv" if beir is not None else source,
            cases=cases,
            config=config,
            retriever=retriever,
            corpus=eligible_corpus(index, eligibility, config.scope),
        )
    finally:
        index.close()


def _cutoffs(ks: str) -> tuple[int, ...]:
    try:
        return tuple(int(k) for k in ks.split(","))
    except ValueError as error:
        raise typer.BadParameter(
            "comma-separated integers, e.g. 1,3,5,10", param_hint="--k"
        ) from error


@eval_app.command("run")
def eval_run(
    dataset: Dataset = None,
    beir: Beir = None,
    split: Split = "test",
    mode: ModeOption = "hybrid",
    ks: Annotated[str, typer.Option("--k", help="Cutoffs, comma-separated.")] = "1,3,5,10",
    types: EligibleTypes = None,
    states: EligibleStates = None,
    tenant: CallerTenant = None,
    threshold_dense: Annotated[
        float | None, typer.Option(help="Minimum dense score (default: RAGWRIGHT_THRESHOLD_DENSE).")
    ] = None,
    threshold_sparse: Annotated[
        float | None, typer.Option(help="Minimum BM25 score (default: RAGWRIGHT_THRESHOLD_SPARSE).")
    ] = None,
    threshold_fusion: Annotated[
        float | None, typer.Option(help="Minimum RRF score (default: RAGWRIGHT_THRESHOLD_FUSION).")
    ] = None,
    threshold_rerank: Annotated[
        float | None,
        typer.Option(help="Minimum rerank score (default: RAGWRIGHT_THRESHOLD_RERANK)."),
    ] = None,
    with_text: Annotated[
        bool, typer.Option("--with-text", help="Store chunk texts in the run.")
    ] = False,
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    as_json: AsJson = False,
) -> None:
    """Run an evaluation and persist it under RAGWRIGHT_HOME/evaluations/<execution-id>/."""
    import hashlib

    from ragwright.pipeline.evaluate import run_evaluation, save_run
    from ragwright.runtime import embedding_profile, lexical_profile, thresholds

    settings = load_settings()
    given = {
        "dense": threshold_dense,
        "sparse": threshold_sparse,
        "fusion": threshold_fusion,
        "rerank": threshold_rerank,
    }
    # Options given on the command line override the configured thresholds.
    chosen = dataclasses.replace(
        thresholds(settings), **{stage: v for stage, v in given.items() if v is not None}
    )
    with _evaluation(
        settings, dataset, beir, split, mode, _cutoffs(ks), types, states, tenant, chosen, with_text
    ) as setup:
        profile = embedding_profile(settings)
        record = run_evaluation(
            setup.cases,
            setup.retriever,
            setup.config,
            setup.corpus,
            run_config={
                "dataset": str(setup.source),
                "dataset_sha256": hashlib.sha256(setup.fingerprint_path.read_bytes()).hexdigest(),
                "embedding_profile": profile.profile_id,
                "model_digest": profile.artifact_digest,
                "lexical_profile": lexical_profile(settings).profile_id,
                "chunking_version": setup.config.eligibility.chunking_version,
                "rrf_k": settings.rrf_k,
                "rrf_weights": list(settings.rrf_weights),
                "reranker": settings.reranker,
                "collection": settings.collection,
                "code_revision": _code_revision(),
            },
        )
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


@eval_app.command("calibrate")
def eval_calibrate(
    dataset: Annotated[
        Path, typer.Argument(help="JSONL dataset with answerable and unsupported cases.")
    ],
    mode: ModeOption = "hybrid",
    k: Annotated[int, typer.Option("--k", min=1, help="Cutoff for Recall@K and nDCG@K.")] = 5,
    types: EligibleTypes = None,
    states: EligibleStates = None,
    tenant: CallerTenant = None,
    max_recall_loss: Annotated[
        float,
        typer.Option("--max-recall-loss", min=0.0, help="Recall@K the recommendation may give up."),
    ] = 0.0,
    max_candidates: Annotated[
        int,
        typer.Option("--max-candidates", min=2, help="Thresholds tried per leg, 'none' included."),
    ] = 8,
    as_json: AsJson = False,
) -> None:
    """Sweep dense/BM25 score thresholds so unsupported questions find no evidence.

    Tries "no threshold" and, per leg, the smallest margin that rejects each unsupported
    question; prints false-acceptance rate, Recall@K, nDCG@K and refused answerable
    questions for every combination, and recommends the lowest false acceptance within
    --max-recall-loss of the unthresholded Recall@K. Nothing is persisted: put the
    recommendation in ragwright.toml (threshold_dense, threshold_sparse) to apply it to
    search and ask.
    """
    from ragwright.pipeline.calibrate import calibrate
    from ragwright.pipeline.retrieve import Thresholds

    with (
        _evaluation(
            load_settings(), dataset, None, "test", mode, (k,), types, states, tenant, Thresholds()
        ) as setup,
        _Progress(enabled=sys.stderr.isatty() and not as_json) as bar,
    ):
        result = calibrate(
            setup.cases,
            setup.retriever,
            setup.config,
            setup.corpus,
            k=k,
            max_recall_loss=max_recall_loss,
            max_candidates=max_candidates,
            progress=bar,
        )
    rows = [
        {
            "threshold_dense": r.thresholds.dense,
            "threshold_sparse": r.thresholds.sparse,
            "false_acceptance_rate": round(r.false_acceptance_rate, 4),
            f"recall@{k}": round(r.recall, 4),
            f"ndcg@{k}": round(r.ndcg, 4),
            "refused_answerable": r.refused_answerable,
            "recommended": r is result.recommended,
        }
        for r in result.rows
    ]
    if as_json:
        print(
            json.dumps(
                {
                    "mode": result.mode,
                    "k": k,
                    "answerable": result.answerable,
                    "unsupported": result.unsupported,
                    "rows": rows,
                    "recommended": next(r for r in rows if r["recommended"]),
                },
                indent=2,
            )
        )
        return
    print(
        f"calibration ({result.mode}, K={k}): {result.answerable} answerable, "
        f"{result.unsupported} unsupported, {len(rows)} combinations"
    )
    print(f"  {'dense':>8} {'bm25':>8} {'FA':>6} {'R@K':>6} {'nDCG':>6} {'refused':>7}")
    for row in rows:
        dense, sparse = row["threshold_dense"], row["threshold_sparse"]
        print(
            f"{'*' if row['recommended'] else ' '} "
            f"{'-' if dense is None else f'{dense:.4f}':>8} "
            f"{'-' if sparse is None else f'{sparse:.4f}':>8} "
            f"{row['false_acceptance_rate']:6.3f} {row[f'recall@{k}']:6.3f} "
            f"{row[f'ndcg@{k}']:6.3f} {row['refused_answerable']:>7}"
        )
    chosen = result.recommended.thresholds
    print("recommended (ragwright.toml):")
    for name in ("dense", "sparse"):
        value = getattr(chosen, name)
        if value is not None:
            print(f"  threshold_{name} = {value:.4f}")
    if chosen.dense is None and chosen.sparse is None:
        print("  no threshold: none lowers false acceptance within the allowed recall loss")


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

"""Evaluation commands: ``eval run``, ``eval calibrate``, ``eval compare`` and ``eval report``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from ragwright.cli.common import (
    AsJson,
    CallerTenant,
    ChunkingVersion,
    EligibleStates,
    EligibleTypes,
    SearchMode,
    ShowProgress,
    ThresholdDense,
    ThresholdFusion,
    ThresholdRerank,
    ThresholdSparse,
    check_choice,
    eval_app,
    evidence_filter,
    print_json,
    threshold_overrides,
)
from ragwright.core.answers import ANSWER_STYLES

if TYPE_CHECKING:
    from ragwright.application import CalibrateResult, Dataset

MODES = ("dense", "sparse", "hybrid")
METRICS = ("precision", "recall", "reciprocal_rank", "ndcg")

DatasetArgument = Annotated[
    Path | None,
    typer.Argument(help="JSONL dataset (docs/evaluation.md); omit with --beir.", metavar="DATASET"),
]
Beir = Annotated[
    Path | None,
    typer.Option("--beir", metavar="DIR", help="BEIR directory: document-level evaluation."),
]
Split = Annotated[str, typer.Option("--split", metavar="SPLIT", help="BEIR qrels split.")]


def _compare_with(condition: str = "") -> Any:
    return typer.Option(
        "--compare",
        metavar="EARLIER",
        help="Execution id or path of an earlier run: the report shows summary deltas "
        f"and per-case changes against it{condition}.",
    )


def _dataset(dataset: Path | None, beir: Path | None, split: str) -> Dataset:
    from ragwright.application import Dataset

    if dataset is None and beir is None:
        raise typer.BadParameter("give a DATASET file or --beir DIR", param_hint="DATASET")
    if dataset is not None and beir is not None:
        raise typer.BadParameter("give a DATASET or --beir DIR, not both", param_hint="DATASET")
    if beir is not None:
        return Dataset(beir, beir=True, split=split)
    return Dataset(cast(Path, dataset))


def _cutoffs(ks: str) -> tuple[int, ...]:
    try:
        cutoffs = tuple(int(k) for k in ks.split(","))
    except ValueError as error:
        raise typer.BadParameter(
            "comma-separated integers, e.g. 1,3,5,10", param_hint="--k"
        ) from error
    if any(k <= 0 for k in cutoffs):
        raise typer.BadParameter("cutoffs must be positive", param_hint="--k")
    return cutoffs


@eval_app.command("run")
def eval_run(
    dataset: DatasetArgument = None,
    beir: Beir = None,
    split: Split = "test",
    mode: SearchMode = "hybrid",
    ks: Annotated[
        str, typer.Option("--k", metavar="K,K,...", help="Cutoffs, comma-separated.")
    ] = "1,3,5,10",
    types: EligibleTypes = None,
    states: EligibleStates = None,
    chunking_version: ChunkingVersion = None,
    tenant: CallerTenant = None,
    threshold_dense: ThresholdDense = None,
    threshold_sparse: ThresholdSparse = None,
    threshold_fusion: ThresholdFusion = None,
    threshold_rerank: ThresholdRerank = None,
    with_text: Annotated[
        bool,
        typer.Option(
            "--with-text/--without-text",
            help="Store the retrieved chunks' texts in the run (the report shows them);"
            " --without-text keeps only ids and scores.",
        ),
    ] = True,
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    compare: Annotated[str | None, _compare_with(" (needs --report)")] = None,
    answers: Annotated[
        bool,
        typer.Option(
            "--answers",
            help="Also answer every question (one after another) and score the answers.",
        ),
    ] = False,
    style: Annotated[
        str | None,
        typer.Option(
            "--style",
            metavar="STYLE",
            help="Answer style with --answers: quoted, generated or evidence "
            "(default: the configured one).",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN",
            help="With --answers: finish the unfinished answer run RUN (execution id, or "
            "'latest'), answering only the questions it has no answer for; refused when "
            "the dataset or configuration differs.",
        ),
    ] = None,
    progress: ShowProgress = False,
    as_json: AsJson = False,
) -> None:
    """Run an evaluation and persist it under RAGWRIGHT_HOME/evaluations/<execution-id>/.

    With --answers the questions are answered one after another: a terminal shows a
    progress bar (count, rate, time left), --progress prints a line every few seconds
    elsewhere. Each answer is saved as it completes: an interrupted run keeps them, and
    the same command with --resume EXECUTION-ID answers the rest."""
    from ragwright.application import EvaluateRequest
    from ragwright.cli.common import application, left_out_notes, thresholds_line
    from ragwright.cli.progress import ProgressDisplay

    check_choice(mode, MODES, "--mode")
    if style is not None:
        check_choice(style, ANSWER_STYLES, "--style")
        if not answers:
            raise typer.BadParameter("applies only with --answers", param_hint="--style")
    if resume is not None and not answers:
        raise typer.BadParameter("applies only with --answers", param_hint="--resume")
    with ProgressDisplay(force_lines=progress) as display:
        result = application().evaluate(
            EvaluateRequest(
                dataset=_dataset(dataset, beir, split),
                mode=cast(Any, mode),
                ks=_cutoffs(ks),
                evidence=evidence_filter(types, states, None, chunking_version),
                tenant=tenant,
                thresholds=threshold_overrides(
                    threshold_dense, threshold_sparse, threshold_fusion, threshold_rerank
                ),
                with_text=with_text,
                report=report,
                compare=compare,
                answers=answers,
                style=cast(Any, style),
                resume=resume,
            ),
            progress=display,
        )
    if as_json:
        print_json(result.to_dict())
        return
    summary, unsupported = result.summary, result.unsupported
    if result.resumed is not None and result.answers is not None:
        total = result.answers["cases"]
        print(
            f"resumed run {result.execution_id}: {result.resumed} of {total} cases were "
            f"already answered, {total - result.resumed} answered now"
        )
    print(f"evaluation {result.execution_id}: {summary['cases']} answerable cases")
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
    data = result.to_dict()
    print(f"  {thresholds_line(data)}")
    for note in left_out_notes(data, data["chunking_version"]):
        print(f"  {note}")
    if result.answers is not None:
        _print_answers(result.answers)
    saved = f"saved {result.path / 'run.json'}"
    print(saved + (f" and {result.report_path}" if result.report_path else ""))


def _print_answers(answers: Mapping[str, Any]) -> None:
    answerable, unsupported = answers["answerable"], answers["unsupported"]
    f1, rouge = answerable["token_f1"], answerable["rouge_l"]
    latency = answers["latency_ms"]
    print(
        f"  answers ({answers['style'] or 'default style'}): "
        f"{answerable['answered']}/{answerable['cases']} answerable answered, "
        f"{answerable['gold_cited']} citing gold evidence"
    )
    print(
        f"    token F1 {_figure(f1['answered'])} answered / {_figure(f1['all'])} all, "
        f"ROUGE-L {_figure(rouge['answered'])} / {_figure(rouge['all'])} "
        f"({answerable['with_references']} with references)"
    )
    print(
        f"    unsupported declined {unsupported['declined']}/{unsupported['cases']}, "
        f"invalid citations {answers['invalid_citations']}, "
        f"latency p50 {_figure(latency['p50'], '.0f')} ms p95 {_figure(latency['p95'], '.0f')} ms"
    )
    sentences = answerable["sentences"]
    if sentences["scored"]:
        print(
            f"    selected sentences vs reference selections: precision "
            f"{_figure(sentences['precision'])}, recall {_figure(sentences['recall'])} "
            f"({sentences['scored']} answerable cases)"
        )
    statuses = ", ".join(f"{name} {count}" for name, count in answers["statuses"].items())
    verdicts = ", ".join(f"{name} {count}" for name, count in answers["support"].items())
    print(f"    statuses: {statuses}; support: {verdicts}")
    print(
        "    (support: supported = every claim backed by a cited source, flagged = backed,"
        " but a cited source backs nothing; unsupported = the check failed;"
        " not_checked = no check ran: no generated answer, or the check is off)"
    )


def _figure(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


@eval_app.command("calibrate")
def eval_calibrate(
    dataset: Annotated[
        Path | None,
        typer.Argument(
            help="JSONL dataset with answerable and unsupported cases (omit with --clear).",
            metavar="DATASET",
        ),
    ] = None,
    mode: SearchMode = "hybrid",
    k: Annotated[
        int, typer.Option("--k", min=1, metavar="K", help="Cutoff for Recall@K and nDCG@K.")
    ] = 5,
    types: EligibleTypes = None,
    states: EligibleStates = None,
    chunking_version: ChunkingVersion = None,
    tenant: CallerTenant = None,
    max_recall_loss: Annotated[
        float,
        typer.Option(
            "--max-recall-loss",
            min=0.0,
            metavar="R",
            help="Recall@K the recommendation may give up.",
        ),
    ] = 0.0,
    max_candidates: Annotated[
        int,
        typer.Option(
            "--max-candidates",
            min=2,
            metavar="N",
            help="Thresholds tried per leg, 'none' included.",
        ),
    ] = 8,
    folds: Annotated[
        int | None,
        typer.Option(
            "--folds",
            min=2,
            metavar="N",
            help="Held-out figures from N stratified folds, each judged under the "
            "recommendation made on the others (default: 5).",
            show_default=False,
        ),
    ] = None,
    holdout: Annotated[
        Path | None,
        typer.Option(
            "--holdout",
            metavar="FILE",
            help="Held-out figures from this JSONL dataset instead of folds.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            # 20 is pipeline.calibrate.MIN_UNSUPPORTED (not imported: --help stays fast).
            help="Recommend from fewer than 20 unsupported questions.",
        ),
    ] = False,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Persist the recommendation beside the index (calibration.json, replacing "
            "any earlier one); search, ask and eval run then apply it.",
        ),
    ] = False,
    clear: Annotated[
        bool,
        typer.Option("--clear", help="Remove the persisted calibration (no DATASET)."),
    ] = False,
    max_answerable_loss: Annotated[
        float,
        typer.Option(
            "--max-answerable-loss",
            min=0.0,
            max=1.0,
            metavar="R",
            help="Share of answerable questions the answerability threshold may decline.",
        ),
    ] = 0.1,
    progress: ShowProgress = False,
    as_json: AsJson = False,
) -> None:
    """Sweep dense/BM25 score thresholds so unsupported questions find no evidence.

    Tries "no threshold" and, per leg, the smallest margin that rejects each unsupported
    question, and prints one row per combination:

    \b
      dense, bm25  the thresholds tried ('-' = none)
      FA           false-acceptance rate: share of unsupported questions that still
                   find evidence (lower is better)
      R@K, nDCG@K  retrieval quality on the answerable questions at cutoff K
      refused      answerable questions left with no evidence at all

    The recommendation (*) is the lowest FA within --max-recall-loss of the
    unthresholded Recall@K; the held-out line shows how that rule fares on questions it
    did not see. It needs at least 20 unsupported questions (--force to go below).

    Then, under the recommended thresholds, every question's answerability signal (the
    similarity of the question with its best evidence sentence, as ask computes it) is
    scored, and the threshold that declines the most unsupported questions while
    declining at most --max-answerable-loss of the answerable ones is recommended, with
    its held-out figures.

    --write persists both beside the index; search, ask and eval run then apply them
    wherever no option or setting (RAGWRIGHT_THRESHOLD_*, RAGWRIGHT_ANSWERABILITY_THRESHOLD)
    sets a value. --clear removes them.
    """
    from ragwright.application import CalibrateRequest, Dataset
    from ragwright.cli.common import application
    from ragwright.cli.progress import ProgressDisplay

    if clear:
        if dataset is not None or write:
            raise typer.BadParameter(
                "--clear takes no DATASET and no --write", param_hint="--clear"
            )
        _clear_calibration(as_json)
        return
    if dataset is None:
        raise typer.BadParameter("give a DATASET (or --clear)", param_hint="DATASET")
    if holdout is not None and folds is not None:
        raise typer.BadParameter("give --folds or --holdout, not both", param_hint="--holdout")
    check_choice(mode, MODES, "--mode")
    request = CalibrateRequest(
        dataset=Dataset(dataset),
        mode=cast(Any, mode),
        k=k,
        evidence=evidence_filter(types, states, None, chunking_version),
        tenant=tenant,
        max_recall_loss=max_recall_loss,
        max_candidates=max_candidates,
        folds=5 if folds is None else folds,
        holdout=Dataset(holdout) if holdout is not None else None,
        force=force,
        write=write,
        max_answerable_loss=max_answerable_loss,
    )
    with ProgressDisplay(force_lines=progress) as display:
        result = application().calibrate(request, progress=display)
    if as_json:
        print_json(result.to_dict())
        return
    _print_calibration(result, k)


def _clear_calibration(as_json: bool) -> None:
    from ragwright.application import ClearCalibrationRequest
    from ragwright.cli.common import application

    cleared = application().clear_calibration(ClearCalibrationRequest())
    if as_json:
        print_json(cleared.to_dict())
    else:
        print(f"removed {cleared.path}" if cleared.removed else "no persisted calibration")


def _print_calibration(result: CalibrateResult, k: int) -> None:
    """The sweep's table, the recommendation with its in-sample and held-out figures, the
    answerability threshold and whether it was written."""
    from ragwright.pipeline.calibrate import MIN_UNSUPPORTED

    print(
        f"calibration ({result.mode}, K={k}): {result.answerable} answerable, "
        f"{result.unsupported} unsupported, {len(result.rows)} combinations"
    )
    print(
        "  FA = share of unsupported questions still given evidence (lower is better);"
        " refused = answerable questions left with no evidence; * = recommended"
    )
    print(f"  {'dense':>8} {'bm25':>8} {'FA':>6} {'R@K':>6} {'nDCG':>6} {'refused':>7}")
    for row in result.rows:
        dense, sparse = row.threshold_dense, row.threshold_sparse
        print(
            f"{'*' if row.recommended else ' '} "
            f"{'-' if dense is None else f'{dense:.4f}':>8} "
            f"{'-' if sparse is None else f'{sparse:.4f}':>8} "
            f"{row.false_acceptance_rate:6.3f} {row.recall:6.3f} "
            f"{row.ndcg:6.3f} {row.refused_answerable:>7}"
        )
    chosen, held = result.recommended, result.held_out
    print(
        f"in-sample: FA {chosen.false_acceptance_rate:.3f}, R@{k} {chosen.recall:.3f}, "
        f"refused {chosen.refused_answerable} of {result.answerable} answerable"
    )
    if held is not None:
        where = f"{held.folds} folds" if held.method == "k-fold" else str(held.dataset)
        print(
            f"held-out ({where}): FA {held.false_acceptance_rate:.3f}, R@{k} {held.recall:.3f}, "
            f"refused {held.refused_answerable} of {held.answerable} answerable"
        )
    if result.forced:
        print(
            f"warning: only {result.unsupported} unsupported questions (--force); "
            f"{MIN_UNSUPPORTED} or more make a recommendation worth trusting"
        )
    print("recommended:")
    for name, value in (("dense", chosen.threshold_dense), ("sparse", chosen.threshold_sparse)):
        if value is not None:
            print(f"  threshold_{name} = {value:.4f}")
    if chosen.threshold_dense is None and chosen.threshold_sparse is None:
        print("  no threshold: none lowers false acceptance within the allowed recall loss")
    _print_answerability(result)
    if result.written is not None:
        print(f"written to {result.written}: search, ask and eval run apply it")
    else:
        print("not persisted: pass --write to apply it to search, ask and eval run")


def _print_answerability(result: CalibrateResult) -> None:
    signal = result.answerability
    if signal is None:
        return
    if signal.threshold is None:
        print(
            "  answerability: no threshold declines an unsupported question within "
            f"--max-answerable-loss {signal.max_answerable_loss:g}"
        )
        return
    print(f"  answerability_threshold = {signal.threshold:.4f}")
    for name, figures in (("in-sample", signal.in_sample), ("held-out", signal.held_out)):
        print(
            f"    {name}: declines {figures.unsupported_declined} of {figures.unsupported} "
            f"unsupported, {figures.answerable_declined} of {figures.answerable} answerable"
        )


@eval_app.command("compare")
def eval_compare(
    before: Annotated[
        str, typer.Argument(help="Execution id or path of the earlier run.", metavar="BEFORE")
    ],
    after: Annotated[
        str, typer.Argument(help="Execution id or path of the later run.", metavar="AFTER")
    ],
    k: Annotated[int, typer.Option("--k", min=1, metavar="K", help="Cutoff to compare.")] = 10,
    metric: Annotated[
        str,
        typer.Option(
            "--metric", metavar="METRIC", help="precision, recall, reciprocal_rank or ndcg."
        ),
    ] = "ndcg",
    as_json: AsJson = False,
) -> None:
    """List per-case regressions and improvements from BEFORE to AFTER."""
    from ragwright.application import CompareRequest
    from ragwright.cli.common import application

    check_choice(metric, METRICS, "--metric")
    result = application().compare(
        CompareRequest(before=before, after=after, k=k, metric=cast(Any, metric))
    )
    if as_json:
        print_json(result.to_dict())
        return
    for note in result.notes:
        print(f"note: {note}")
    print(
        f"{len(result.regressions)} regressions, {len(result.improvements)} improvements "
        f"({metric}@{k})"
    )
    for label, changes in (("regressed", result.regressions), ("improved", result.improvements)):
        for change in changes:
            print(f"  {label:<9} {change.case_id}: {change.before:.3f} -> {change.after:.3f}")


@eval_app.command("report")
def eval_report(
    run: Annotated[str, typer.Argument(help="Execution id or path of a run.", metavar="RUN")],
    compare: Annotated[str | None, _compare_with()] = None,
    as_json: AsJson = False,
) -> None:
    """Write report.html for a persisted run and print its path."""
    from ragwright.application import ReportRequest
    from ragwright.cli.common import application

    result = application().report(ReportRequest(run, compare=compare))
    if as_json:
        print_json(result.to_dict())
        return
    print(result.path)

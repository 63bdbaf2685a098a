"""Answer quality per answer style, through the application layer with the local model.

Datasets:

- ``clapnq``: the ClapNQ part in ``../shared/data/clapnq`` (143 answerable, 132
  unanswerable questions, one passage each). Its 274 passages (``markdown/<id>.md``,
  document type ``note``) are ingested into a temporary RAGWRIGHT_HOME and its questions
  converted into our JSONL cases in a temporary directory (chunking ``sentence-blocks``,
  400 words, 256 tokens, as for SciFact; answerable: the gold passage
  as a document-level key, ``reference_answers``, ``reference_selected_sentences`` as
  ``reference_sentences`` with empty selections left out; unanswerable: ``unsupported``).
  Nothing of it is copied into the project: the results keep figures, statuses and ids.
  A fixed split: a question is ``tune`` when the first byte of the SHA-256 of its id is
  even, else ``test`` (140 tune: 83 answerable, 57 unanswerable; 135 test: 60 / 75).
- ``samples``: ``samples/eval/cases.jsonl`` over ``samples/corpus`` (published runbooks
  and notes); it has no split.

``--data DIR`` reads any ClapNQ-shaped folder instead of ``../shared/data/clapnq``: a
``questions.jsonl`` (``id``, ``question``, ``answerable``, and for answerable questions
``gold_passage_ids``, ``reference_answers``, ``reference_selected_sentences``) and a
``markdown/`` folder of passages (document type ``note``), split by the same rule.
``--home DIR`` reuses the index in an existing RAGWRIGHT_HOME instead of ingesting into a
temporary one (with one ``--dataset``, not ``both``): nothing is ingested and no
calibration is written into it — its answers apply the thresholds that home already
applies (its settings or persisted calibration), under the chunking version its queries
pick; the local model's cache is that home's ``models/``.

For every dataset, split and style, every question is answered in turn by
``Application.answer`` (the default configuration: the embedded local model at
temperature 0, the configured thresholds and support check) and scored by
``ragwright.pipeline.answer_scoring`` — the scoring ``eval run --answers`` persists — plus
sentence selection precision/recall of the sentences an answer selected (``quoted``
and ``evidence`` styles) against the reference selections. ``--limit N`` keeps the first
ceil(N/2) answerable and floor(N/2) unanswerable questions of each split, in file order.
Writes ``benchmarks/results/answers.json``.

    python benchmarks/answers.py [--styles quoted,generated,evidence]
        [--split tune|test|both] [--dataset clapnq|samples|both] [--limit N] [--out PATH]
        [--data DIR] [--home DIR] [--no-calibrate] [--shown VARIANT]

``--shown`` swaps what a quoted request shows the model (the product's
``shown_to_model``) for another choice, to compare them on the same path; each case's
``selection_f1`` is the token F1 of the sentences its outcome selected (for the
``evidence`` style, the deterministic selection: the no-model baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from ragwright.adapters.chatmodels.local import assemble_model
from ragwright.adapters.datasets import load_cases
from ragwright.application import (
    AnswerRequest,
    Application,
    CalibrateRequest,
    Dataset,
    EvidenceFilter,
    IngestRequest,
)
from ragwright.core.answer_metrics import token_f1
from ragwright.core.answers import ANSWER_STYLES, MAX_QUOTES, QUOTED_INSTRUCTIONS
from ragwright.core.sentences import EvidenceSentence
from ragwright.errors import AnswerContractError, ChatError
from ragwright.pipeline import answer_stages
from ragwright.pipeline import answerability as answerability_module
from ragwright.pipeline.answer_scoring import (
    ANSWERED,
    error_outcome,
    score_answer,
    score_sentences,
    selected_sentences,
    summarise_answers,
)
from ragwright.runtime import build_application
from ragwright.settings import load_settings
from ragwright.types import EvalCase

ROOT = Path(__file__).resolve().parents[1]
CLAPNQ = ROOT.parent / "shared" / "data" / "clapnq"
STYLES = ANSWER_STYLES
SPLITS = ("tune", "test")
# ClapNQ passages are single paragraphs of up to a few hundred words: the default
# section-paragraphs policy (80 words) cannot hold them, so they are chunked like SciFact.
CLAPNQ_CHUNKING = {"chunking": "sentence-blocks", "max_words": 400, "max_tokens": 256}
# Per-case figures kept in the results (no question, answer or reference text).
KEPT = ("status", "token_f1", "rouge_l", "gold_cited", "support", "latency_ms")


# What a quoted request shows the model (--shown): the product's choice, and others it
# can be compared with through the same answer path.
SHOWN: dict[
    str, Callable[[Sequence[EvidenceSentence], dict[str, float]], list[EvidenceSentence]]
] = {
    "product": answerability_module.shown_to_model,
    "ranked": functools.partial(answerability_module.shown_to_model, count=5, one_source=False),
    "source-ranked": functools.partial(answerability_module.shown_to_model, count=5),
    "selection": functools.partial(answerability_module.shown_to_model, count=3),
    "confirm": functools.partial(answerability_module.shown_to_model, count=3),
}


# --shown confirm: the evidence style's selection, best first, with instructions to keep
# every sentence that helps and drop the rest (the model confirms rather than searches).
CONFIRM_INSTRUCTIONS = QUOTED_INSTRUCTIONS.replace(
    'Each sentence has an id such as S1.2. Return status "answered" and the ids of the '
    f"sentences (at most {MAX_QUOTES}) that best answer the question, including any "
    "condition or exception they state.",
    "The sentences are listed most relevant first; each has an id such as S1.2. Return "
    'status "answered" and the ids of the sentences that state the answer or part of it, '
    "with any condition or exception they state; leave out only those that do not help "
    "answer the question.",
)


def clapnq_split(question_id: str) -> str:
    """``tune`` when the first byte of SHA-256(id) is even, else ``test``."""
    return "tune" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "test"


def clapnq_rows(split: str, data: Path = CLAPNQ) -> list[dict[str, Any]]:
    """The split's questions of the ClapNQ-shaped folder ``data`` as our JSONL cases."""
    rows = []
    with (data / "questions.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            question = json.loads(line)
            if clapnq_split(question["id"]) != split:
                continue
            row: dict[str, Any] = {
                "id": question["id"],
                "category": split,
                "question": question["question"],
            }
            if question["answerable"]:
                row["relevant"] = [
                    {"document_id": passage, "grade": 2} for passage in question["gold_passage_ids"]
                ]
                row["reference_answers"] = question["reference_answers"]
                row["reference_sentences"] = [
                    s for s in question["reference_selected_sentences"] if s
                ]
            else:
                row["unsupported"] = True
            rows.append(row)
    return rows


def limited(rows: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The first ceil(limit/2) answerable and floor(limit/2) unanswerable rows."""
    if limit is None:
        return rows
    answerable = [r for r in rows if not r.get("unsupported")][: (limit + 1) // 2]
    unsupported = [r for r in rows if r.get("unsupported")][: limit // 2]
    return answerable + unsupported


def write_cases(rows: list[dict[str, Any]], directory: Path, name: str) -> list[EvalCase]:
    """Write ``rows`` as JSONL and load them back through the dataset validation."""
    path = directory / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return load_cases(path)


async def answer_all(
    app: Application, cases: Sequence[EvalCase], evidence: EvidenceFilter, style: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Answer every case in turn; (scored rows, sentence-selection rows)."""
    chunking_version = app.eligibility(evidence).chunking_version
    async with app.chat_kept_open():  # one warm model for the whole run
        return await _answer_each(app, cases, evidence, style, chunking_version)


async def _answer_each(
    app: Application,
    cases: Sequence[EvalCase],
    evidence: EvidenceFilter,
    style: str,
    chunking_version: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, selections = [], []
    for number, case in enumerate(cases, start=1):
        started = time.perf_counter()
        request = AnswerRequest(case.question, evidence=evidence, style=cast(Any, style))
        try:
            outcome = (await app.answer(request)).to_dict()
        except ChatError as error:  # recorded as eval run --answers records it
            outcome = error_outcome(f"{error.category.value}: {error}", style)
        except AnswerContractError as error:
            outcome = error_outcome(str(error), style)
        row = score_answer(
            case,
            outcome,
            latency_ms=(time.perf_counter() - started) * 1000,
            chunking_version=chunking_version,
        )
        rows.append(row)
        selected = selected_sentences(outcome)
        scores = (
            score_sentences(selected, case)
            if selected is not None and not case.unsupported
            else None
        )
        selections.append(
            {
                "selected": len(selected) if selected is not None else None,
                "precision": scores.precision if scores else None,
                "recall": scores.recall if scores else None,
                # The selected sentences, joined, against the references: the F1 of the
                # deterministic selection (evidence style) is the no-model baseline.
                "selection_f1": (
                    round(token_f1(" ".join(selected), list(case.reference_answers)), 4)
                    if selected and case.reference_answers and row["status"] != "insufficient"
                    else None
                ),
            }
        )
        print(
            f"  {style:<9} {number:>3}/{len(cases)} {case.case_id:<22} {row['status']:<21}"
            f" {row['latency_ms']:>8.0f} ms",
            flush=True,
        )
    return rows, selections


def sentence_summary(
    cases: Sequence[EvalCase], rows: Sequence[dict[str, Any]], selections: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Mean sentence precision/recall over the answerable cases with reference sentences
    whose outcome selected sentences, over those answered, and over all of them (no
    selection = 0); only counts when the style selects sentences."""
    eligible = [
        (row, s)
        for case, row, s in zip(cases, rows, selections, strict=True)
        if not case.unsupported and case.reference_sentences
    ]
    if all(s["selected"] is None for _, s in eligible):
        return {"with_reference_sentences": len(eligible), "with_selection": 0}
    scored = [s for _, s in eligible if s["precision"] is not None and s["selected"]]
    with_answers = [s for case, s in zip(cases, selections, strict=True) if case.reference_answers]
    f1 = [s["selection_f1"] for s in with_answers if s["selection_f1"] is not None]
    answered = [
        s for row, s in eligible if row["status"] == ANSWERED and s["precision"] is not None
    ]

    def mean(values: list[float], count: int) -> float | None:
        return round(sum(values) / count, 4) if count else None

    return {
        "with_reference_sentences": len(eligible),
        "with_selection": len(scored),
        "precision": mean([s["precision"] for s in scored], len(scored)),
        "recall": mean([s["recall"] for s in scored], len(scored)),
        "precision_answered": mean([s["precision"] for s in answered], len(answered)),
        "recall_answered": mean([s["recall"] for s in answered], len(answered)),
        "precision_all": mean([s["precision"] for s in scored], len(eligible)),
        "recall_all": mean([s["recall"] for s in scored], len(eligible)),
        # Token F1 of the selection that passed the gate (evidence_only or answered):
        # over those, and over every answerable case with references (none = 0).
        "selection_f1": mean(f1, len(f1)),
        "selection_f1_all": mean(f1, len(with_answers)),
        "selection_f1_cases": len(f1),
    }


def run_dataset(
    name: str,
    sources: Path,
    evidence: EvidenceFilter,
    splits: dict[str, list[dict[str, Any]]],
    styles: Sequence[str],
    *,
    calibrate_on: list[dict[str, Any]] | None,
    progress: Any = None,
    home: Path | None = None,
    **settings: object,
) -> dict[str, Any]:
    """Ingest ``sources`` into a fresh home (``settings`` over the defaults), calibrate
    the retrieval and answerability thresholds on ``calibrate_on`` (persisted, so every
    answer applies them as ``ask`` would; ``None``: no thresholds) and run every split
    under every style; ``progress(results)`` is called after each style.

    With ``home``, its index is used as it is: nothing is ingested, ``settings`` and
    ``calibrate_on`` are not used (the home's own settings and calibration apply)."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"ragwright-answers-{name}-") as tmp:
        if home is None:
            home = Path(tmp) / "home"
            app = build_application(load_settings(home=home, **settings))
            ingested = app.ingest(IngestRequest(sources=(sources,)))
            print(f"{name}: {ingested.documents} documents, {ingested.chunks} chunks", flush=True)
        else:
            app = build_application(load_settings(home=home))
            status = app.status()
            chunks = sum(version.live_chunks for version in status.versions)
            print(f"{name}: reusing {home}: {len(status.documents)} documents, {chunks} chunks")
            calibrate_on = None
        # The local model is assembled into a fresh home on its first start: do it now, so
        # the first answer's latency (and deadline) holds only what every answer pays.
        # Evidence-only answers ask no model.
        if set(styles) != {"evidence"}:
            assemble_model(home / "models")
        if calibrate_on is not None:
            write_cases(calibrate_on, Path(tmp), f"{name}-calibration")
            calibration = app.calibrate(
                CalibrateRequest(
                    Dataset(Path(tmp) / f"{name}-calibration.jsonl"),
                    evidence=evidence,
                    force=True,
                    write=True,
                )
            ).to_dict()
            results["calibration"] = {
                key: calibration[key]
                for key in ("recommended", "held_out", "answerability", "forced")
            }
            print(f"{name}: calibrated {json.dumps(results['calibration']['answerability'])}")
        for split, rows in splits.items():
            cases = write_cases(rows, Path(tmp), f"{name}-{split}")
            results[split] = {}
            for style in styles:
                print(f"{name} {split} {style}: {len(cases)} questions", flush=True)
                scored, selections = asyncio.run(answer_all(app, cases, evidence, style))
                summary = summarise_answers(cases, scored, style=style)
                summary["sentences"] = sentence_summary(cases, scored, selections)
                results[split][style] = {
                    "summary": summary,
                    "cases": [
                        {"id": case.case_id, **{k: row[k] for k in KEPT}, **selection}
                        for case, row, selection in zip(cases, scored, selections, strict=True)
                    ],
                }
                if progress is not None:
                    progress(results)
    return results


def table(results: dict[str, Any]) -> str:
    header = (
        f"{'dataset':<8} {'split':<6} {'style':<9} {'answered':>9} {'gold':>6} "
        f"{'F1 ans/all':>11} {'RL ans/all':>11} {'declined':>9} {'inv':>4} "
        f"{'sentP/R':>11} {'selF1 ans/all':>13} {'p50 ms':>7} {'p95 ms':>7}"
    )
    lines = [header]
    for dataset, splits in results.items():
        for split, styles in splits.items():
            if split == "calibration":
                continue
            for style, result in styles.items():
                s = result["summary"]
                a, u = s["answerable"], s["unsupported"]
                sentences = s["sentences"]
                precision, recall = sentences.get("precision"), sentences.get("recall")
                lines.append(
                    f"{dataset:<8} {split:<6} {style:<9} "
                    f"{a['answered']:>4}/{a['cases']:<4} {a['gold_cited']:>6} "
                    f"{_f(a['token_f1']['answered'])}/{_f(a['token_f1']['all'])} "
                    f"{_f(a['rouge_l']['answered'])}/{_f(a['rouge_l']['all'])} "
                    f"{u['declined']:>4}/{u['cases']:<4} {s['invalid_citations']:>4} "
                    f"{_f(precision)}/{_f(recall)} "
                    f"{_f(sentences.get('selection_f1'), 6)}/"
                    f"{_f(sentences.get('selection_f1_all'), 6)} "
                    f"{_f(s['latency_ms']['p50'], 7, 0)} {_f(s['latency_ms']['p95'], 7, 0)}"
                )
    return "\n".join(lines)


def _f(value: float | None, width: int = 5, decimals: int = 3) -> str:
    return "-".rjust(width) if value is None else f"{value:{width}.{decimals}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--styles", default=",".join(STYLES), help="Comma-separated styles.")
    parser.add_argument("--split", choices=(*SPLITS, "both"), default="both")
    parser.add_argument("--dataset", choices=("clapnq", "samples", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="Questions per split.")
    parser.add_argument(
        "--no-calibrate",
        action="store_true",
        help="Answer without a calibration: no retrieval thresholds, and the embedding "
        "profile's uncalibrated default answerability threshold, as in a fresh home "
        "(RAGWRIGHT_ANSWERABILITY_THRESHOLD=-1: no gate) (default: calibrate on ClapNQ's "
        "tune split, or in-sample on the sample set, and apply the persisted thresholds).",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "answers.json"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=CLAPNQ,
        metavar="DIR",
        help="A ClapNQ-shaped folder (questions.jsonl and markdown/) for --dataset clapnq.",
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        metavar="DIR",
        help="Reuse the index of this RAGWRIGHT_HOME (one --dataset): nothing is ingested "
        "or calibrated into it; its own thresholds apply.",
    )
    parser.add_argument(
        "--shown",
        choices=sorted(SHOWN),
        default="product",
        help="What a quoted request shows the model: the product's choice (default), the 5 "
        "most similar sentences best first (ranked), the best source's 5 (source-ranked) "
        "or 3 (selection: the evidence style's own choice) best first; each with the "
        "sentences that qualify them.",
    )
    args = parser.parse_args()
    answerability_module.shown_to_model = SHOWN[args.shown]
    if args.shown == "confirm":
        assert CONFIRM_INSTRUCTIONS != QUOTED_INSTRUCTIONS, "the instructions changed"
        answer_stages.QUOTED_INSTRUCTIONS = CONFIRM_INSTRUCTIONS
    if args.home is not None:
        if args.dataset == "both":
            parser.error("--home: name the one --dataset (clapnq or samples) its index holds")
        if not args.home.is_dir():
            parser.error(f"--home: {args.home} is not a directory")
    styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = sorted(set(styles) - set(STYLES))
    if unknown or not styles:
        parser.error(f"--styles: each one of {', '.join(STYLES)}; got {args.styles!r}")
    results: dict[str, Any] = {}

    def record() -> dict[str, Any]:
        return {
            "config": {
                "styles": styles,
                "split": args.split,
                "limit": args.limit,
                "shown": args.shown,
                "calibrated": ("the home's own thresholds" if args.home else not args.no_calibrate),
                "data": str(args.data),
                "home": str(args.home) if args.home else None,
                "split_rule": "tune when sha256(question id)[0] is even, else test",
            },
            "results": results,
        }

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record(), indent=2), "utf-8")

    if args.dataset in ("clapnq", "both"):
        data = args.data
        if not (data / "questions.jsonl").is_file() or not (
            args.home or (data / "markdown").is_dir()
        ):
            sys.exit(
                f"no ClapNQ-shaped folder at {data} (questions.jsonl and markdown/): "
                "see ../shared/data/README.md"
            )
        splits = SPLITS if args.split == "both" else (args.split,)
        results["clapnq"] = run_dataset(
            "clapnq",
            data / "markdown",
            EvidenceFilter(types=("note",)),
            {split: limited(clapnq_rows(split, data), args.limit) for split in splits},
            styles,
            calibrate_on=None if args.no_calibrate else clapnq_rows("tune", data),
            progress=lambda partial: (results.__setitem__("clapnq", partial), save()),
            home=args.home,
            **CLAPNQ_CHUNKING,
        )
    if args.dataset in ("samples", "both"):
        rows = [
            json.loads(line)
            for line in (ROOT / "samples" / "eval" / "cases.jsonl").read_text("utf-8").splitlines()
            if line.strip()
        ]
        results["samples"] = run_dataset(
            "samples",
            ROOT / "samples" / "corpus",
            EvidenceFilter(types=("runbook", "note")),
            {"all": limited(rows, args.limit)},
            styles,
            calibrate_on=None if args.no_calibrate else rows,
            progress=lambda partial: (results.__setitem__("samples", partial), save()),
            home=args.home,
        )
    print(table(results))
    save()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

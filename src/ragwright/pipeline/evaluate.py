"""Evaluation runs: labelled cases → rankings → metrics at K → a persisted run record.

One run keeps everything but the question fixed: corpus, labels, eligibility, mode and
thresholds. Each question is embedded once and its single ranking (retrieved at the
largest K) is cut at every K, so the cutoffs are comparable. Answerable cases are scored
with :func:`ragwright.core.metrics.score_ranking` and macro-averaged (with the case
count), overall and per category. Unsupported questions are recorded separately — how
many results passed the thresholds and whether the run would have accepted the
question — and never averaged into the metrics. A case that cannot be scored fails the
run.

Document-level cases (BEIR) collapse the chunk ranking to the first occurrence of each
document before scoring.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.core.metrics import RankingScores, score_ranking
from ragwright.errors import EvaluationError, MetricInputError
from ragwright.pipeline.answer_log import ANSWERS, PENDING
from ragwright.pipeline.retrieve import Hit, Mode, RetrievalResult, Retriever, Thresholds
from ragwright.protocols import VectorIndex
from ragwright.types import EvalCase

Key = tuple[str, ...]
METRICS = ("precision", "recall", "reciprocal_rank", "ndcg")


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """What a run holds fixed."""

    eligibility: Eligibility
    scope: CallerScope = field(default_factory=CallerScope)
    mode: Mode = "hybrid"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    thresholds: Thresholds = field(default_factory=Thresholds)
    document_depth_factor: int = 3
    with_text: bool = False


@dataclass(frozen=True, slots=True)
class EligibleCorpus:
    """The chunk keys and documents a run may rank, and a fingerprint of their content."""

    chunks: frozenset[Key]
    documents: frozenset[str]
    fingerprint: str


@dataclass(slots=True)
class RunRecord:
    """Everything a run produced; ``to_json`` is what is persisted."""

    execution_id: str
    created_at: str
    config: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    categories: dict[str, Any] = field(default_factory=dict)
    unsupported: dict[str, Any] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, Any] | None = None
    resumed: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def eligible_corpus(
    index: VectorIndex, eligibility: Eligibility, scope: CallerScope
) -> EligibleCorpus:
    """Scan the eligible points once: keys for label validation and a content fingerprint."""
    chunks: set[Key] = set()
    digest = hashlib.sha256()
    rows = []
    for point in index.scroll(
        eligibility_filter(eligibility, scope),
        payload_fields=("document_id", "chunking_version", "chunk_id", "content_hash"),
    ):
        p = point.payload
        chunks.add((str(p["document_id"]), str(p["chunking_version"]), str(p["chunk_id"])))
        rows.append(f"{point.point_id}:{p.get('content_hash')}")
    for row in sorted(rows):
        digest.update(row.encode())
    return EligibleCorpus(
        frozenset(chunks), frozenset(k[0] for k in chunks), "sha256:" + digest.hexdigest()
    )


def label_keys(case: EvalCase, chunking_version: str) -> dict[Key, int]:
    """The case's judgments keyed like its ranking will be."""
    if case.level == "chunk":
        return {
            (k.document_id, k.chunking_version or chunking_version, str(k.chunk_id)): k.grade
            for k in case.relevant
        }
    return {(k.document_id,): k.grade for k in case.relevant}


def validate_labels(
    cases: Sequence[EvalCase], corpus: EligibleCorpus, chunking_version: str
) -> None:
    """Every labelled key must exist in the eligible corpus; raises before anything runs."""
    problems = []
    for case in cases:
        for key in label_keys(case, chunking_version):
            known = key in corpus.chunks if len(key) == 3 else key[0] in corpus.documents
            if not known:
                problems.append(f"{case.case_id}: {'/'.join(key)}")
    if problems:
        raise EvaluationError(
            f"{len(problems)} labelled keys are outside the eligible corpus: {problems[:10]}"
        )


def retrieval_depth(case: EvalCase, config: EvalConfig) -> int:
    """How deep a case's single ranking is retrieved: the largest K, times
    ``document_depth_factor`` for answerable document-level cases (whose chunk ranking
    collapses to documents)."""
    document_level = case.level == "document" and not case.unsupported
    return max(config.ks) * (config.document_depth_factor if document_level else 1)


def run_evaluation(
    cases: Sequence[EvalCase],
    retriever: Retriever,
    config: EvalConfig,
    corpus: EligibleCorpus,
    *,
    run_config: dict[str, Any],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    token: Callable[[], str] = lambda: secrets.token_hex(3),
) -> RunRecord:
    """Score every case; raise :class:`EvaluationError` if any cannot be scored."""
    _check_cutoffs(config)
    validate_labels(cases, corpus, config.eligibility.chunking_version)
    results = [
        retriever.search(
            retriever.embed(case.question),
            config.eligibility,
            config.scope,
            k=retrieval_depth(case, config),
            mode=config.mode,
            thresholds=config.thresholds,
        )
        for case in cases
    ]
    return score_results(
        cases, results, config, corpus, run_config=run_config, clock=clock, token=token
    )


def score_results(
    cases: Sequence[EvalCase],
    results: Sequence[RetrievalResult],
    config: EvalConfig,
    corpus: EligibleCorpus,
    *,
    run_config: dict[str, Any],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    token: Callable[[], str] = lambda: secrets.token_hex(3),
) -> RunRecord:
    """The run record of ``results[i]`` retrieved for ``cases[i]`` under ``config``, each
    at :func:`retrieval_depth`; :func:`run_evaluation` is retrieval followed by this.

    Raises:
        EvaluationError: bad cutoffs, labels outside ``corpus``, a result count that
            differs from the case count, or a case that cannot be scored.
    """
    _check_cutoffs(config)
    if len(results) != len(cases):
        raise EvaluationError(f"{len(results)} retrieval results for {len(cases)} cases")
    version = config.eligibility.chunking_version
    validate_labels(cases, corpus, version)
    ks = tuple(sorted(set(config.ks)))
    now = clock()
    record = RunRecord(
        execution_id=f"{now:%Y%m%dT%H%M%SZ}-{token()}",
        created_at=now.isoformat(),
        config={
            **run_config,
            "corpus_fingerprint": corpus.fingerprint,
            "eligible_chunks": len(corpus.chunks),
            "mode": config.mode,
            "ks": list(ks),
            "thresholds": asdict(config.thresholds),
            "eligibility": asdict(config.eligibility),
            "tenant": config.scope.tenant,
        },
    )
    failures: list[str] = []
    scored: list[tuple[EvalCase, dict[int, RankingScores]]] = []
    unsupported_rows: list[dict[str, Any]] = []
    for case, result in zip(cases, results, strict=True):
        document_level = case.level == "document" and not case.unsupported
        if case.unsupported:
            unsupported_rows.append(
                {
                    "id": case.case_id,
                    "question": case.question,
                    "results": len(result.hits[: ks[-1]]),
                    "accepted": bool(result.hits),
                    "top_score": result.hits[0].score if result.hits else None,
                }
            )
            continue
        labels = label_keys(case, version)
        ranking, hits_by_key = _ranking(result.hits, document_level)
        ranking = ranking[: ks[-1]]
        judgments = {**{key: 0 for key in ranking}, **labels}
        try:
            metrics = {k: score_ranking(ranking, judgments, k) for k in ks}
        except MetricInputError as error:
            failures.append(f"{case.case_id}: {error}")
            continue
        scored.append((case, metrics))
        record.cases.append(
            {
                "id": case.case_id,
                "category": case.category,
                "question": case.question,
                "level": case.level,
                "relevant": len(labels),
                "ranking": [
                    _ranked_item(key, hits_by_key[key], judgments[key], config.with_text)
                    for key in ranking
                ],
                "metrics": {str(k): asdict(m) for k, m in metrics.items()},
            }
        )
    if failures:
        raise EvaluationError(f"{len(failures)} cases could not be scored: {failures[:5]}")
    record.summary = {"cases": len(scored), "K": _average(m for _, m in scored)}
    by_category: dict[str, list[dict[int, RankingScores]]] = {}
    for case, metrics in scored:
        by_category.setdefault(case.category, []).append(metrics)
    record.categories = {
        name: {"cases": len(rows), "K": _average(rows)}
        for name, rows in sorted(by_category.items())
    }
    accepted = sum(1 for row in unsupported_rows if row["accepted"])
    record.unsupported = {
        "cases": len(unsupported_rows),
        "accepted": accepted,
        "false_acceptance_rate": accepted / len(unsupported_rows) if unsupported_rows else None,
        "results": unsupported_rows,
    }
    return record


def _check_cutoffs(config: EvalConfig) -> None:
    if not config.ks or any(k <= 0 for k in config.ks):
        raise EvaluationError(f"cutoffs must be positive, got {list(config.ks)}")


def _ranking(hits: Sequence[Hit], document_level: bool) -> tuple[list[Key], dict[Key, Hit]]:
    ranking: list[Key] = []
    by_key: dict[Key, Hit] = {}
    for hit in hits:
        key: Key = (hit.payload.document_id,) if document_level else hit.identity
        if document_level and key in by_key:
            continue  # a document keeps the rank of its first chunk
        # A chunk listed twice stays twice: score_ranking rejects it and the run fails.
        ranking.append(key)
        by_key[key] = hit
    return ranking, by_key


def _ranked_item(key: Key, hit: Hit, grade: int, with_text: bool) -> dict[str, Any]:
    """One persisted ranking entry: ``score`` is the final score (its kind is the run's
    ``score_kind``); ``scores`` holds every stage's score that was computed, by kind;
    ``chunk_id`` names the chunk that placed a document-level key; ``text`` is what
    retrieval returned, stored only ``with_text``."""
    stages = (
        ("cosine", hit.dense_score),
        ("bm25", hit.sparse_score),
        ("rrf", hit.fused_score),
        ("rerank", hit.rerank_score),
    )
    return {
        "key": list(key),
        "score": hit.score,
        "scores": {kind: score for kind, score in stages if score is not None},
        "grade": grade,
        **({"chunk_id": hit.payload.chunk_id} if len(key) == 1 else {}),
        **({"text": hit.payload.text} if with_text else {}),
    }


def _average(rows: Iterable[dict[int, RankingScores]]) -> dict[str, dict[str, float]]:
    rows = list(rows)
    if not rows:
        return {}
    result: dict[str, dict[str, float]] = {}
    for k in rows[0]:
        result[str(k)] = {
            name: sum(getattr(r[k], name) for r in rows) / len(rows) for name in METRICS
        }
    return result


def save_run(record: RunRecord, home: Path) -> Path:
    """Write ``<home>/evaluations/<execution-id>/run.json`` (in one rename); returns the
    directory. The directory of an answer run started with :class:`AnswerLog` is
    finished: its ``pending.json`` and ``answers.jsonl`` go once run.json is written."""
    directory = home / "evaluations" / record.execution_id
    pending = directory / PENDING
    directory.mkdir(parents=True, exist_ok=pending.is_file())
    partial = directory / "run.json.partial"
    partial.write_text(json.dumps(record.to_json(), indent=2, ensure_ascii=False), "utf-8")
    partial.replace(directory / "run.json")
    (directory / ANSWERS).unlink(missing_ok=True)
    pending.unlink(missing_ok=True)
    return directory


def load_run(reference: str, home: Path) -> dict[str, Any]:
    """A persisted run by execution id or path to its directory or run.json."""
    path = Path(reference)
    candidates = [path / "run.json", path, home / "evaluations" / reference / "run.json"]
    for candidate in candidates:
        if candidate.is_file():
            data: dict[str, Any] = json.loads(candidate.read_text("utf-8"))
            return data
    for directory in (path, home / "evaluations" / reference):
        if (directory / PENDING).is_file():
            raise EvaluationError(
                f"evaluation run {reference!r} is unfinished (an answer run that was "
                f"interrupted): `eval run ... --answers --resume {directory.name}` finishes it"
            )
    raise EvaluationError(f"no evaluation run {reference!r} under {home / 'evaluations'}")


@dataclass(frozen=True, slots=True)
class CaseChange:
    """A case whose metric moved between two runs."""

    case_id: str
    before: float
    after: float


def compare_runs(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    k: int,
    metric: str = "ndcg",
    tolerance: float = 1e-9,
) -> tuple[list[CaseChange], list[CaseChange], list[str]]:
    """(regressions, improvements, notes) per case at cutoff ``k``."""
    if metric not in METRICS:
        raise EvaluationError(f"metric must be one of {METRICS}")
    notes = []
    for name in ("corpus_fingerprint", "chunking_version", "embedding_profile", "mode"):
        a, b = before["config"].get(name), after["config"].get(name)
        if a != b:
            notes.append(f"{name} differs: {a} → {b}")
    old = {c["id"]: c for c in before["cases"]}
    regressions, improvements = [], []
    for case in after["cases"]:
        previous = old.get(case["id"])
        if previous is None or str(k) not in case["metrics"] or str(k) not in previous["metrics"]:
            continue
        a = previous["metrics"][str(k)][metric]
        b = case["metrics"][str(k)][metric]
        if b < a - tolerance:
            regressions.append(CaseChange(case["id"], a, b))
        elif b > a + tolerance:
            improvements.append(CaseChange(case["id"], a, b))
    missing = sorted(set(old) - {c["id"] for c in after["cases"]})
    if missing:
        notes.append(f"cases only in the first run: {missing[:10]}")
    return regressions, improvements, notes

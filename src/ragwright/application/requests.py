"""Typed requests and results of every use case.

Every option a use case honours is a field of its request, and every result has one
stable JSON form (``to_dict``), the same for the command line's ``--json`` and the HTTP
service. Field names are the contract: add fields, never rename or drop them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragwright.application.grants import WriteGrant
from ragwright.application.keys import ApiKey, check_grant
from ragwright.chat.contract import ChatMessage
from ragwright.core.answers import ANSWER_STYLES, AnswerStyle
from ragwright.errors import RequestError
from ragwright.pipeline.retrieve import Mode, Thresholds
from ragwright.types import (
    DocumentOrigin,
    IngestReport,
    SkippedDocument,
    SourceDocument,
    record_fields,
)

ScoreKind = Literal["cosine", "bm25", "rrf", "rerank"]

# A question is a sentence or a short paragraph; a longer text is a document pasted into
# the question box. The embedding model's token limit applies on top (checked by the use
# case, which knows the model).
MAX_QUESTION_CHARS = 2_000


def control_character(text: str) -> str | None:
    """Why ``text`` is not plain text (a control character other than tab, line feed and
    carriage return: NUL and its kin reach no model and no database as text), or
    ``None``."""
    for position, character in enumerate(text):
        if (ord(character) < 32 and character not in "\t\n\r") or 127 <= ord(character) < 160:
            return (
                f"contains the control character U+{ord(character):04X} at position "
                f"{position}; send plain text"
            )
    return None


def check_question(question: str) -> None:
    """Refuse a blank question or one longer than :data:`MAX_QUESTION_CHARS`.

    Raises:
        RequestError: naming the field ``question`` and the rule.
    """
    if not question.strip():
        raise RequestError("question", "must not be empty or only whitespace")
    control = control_character(question)
    if control is not None:
        raise RequestError("question", control)
    if len(question) > MAX_QUESTION_CHARS:
        raise RequestError(
            "question",
            f"has {len(question):,} characters, at most {MAX_QUESTION_CHARS:,} are allowed; "
            "ask one specific question (retrieval matches short questions best)",
        )


# The one place the default eligibility lives: published runbooks. Requests that name no
# type or state get these; an entry point never repeats them.
DEFAULT_ELIGIBLE_TYPES: tuple[str, ...] = ("runbook",)
DEFAULT_ELIGIBLE_STATES: tuple[str, ...] = ("published",)


@dataclass(frozen=True, slots=True)
class EvidenceFilter:
    """Which indexed evidence a request may use (applied inside every engine query).

    Empty ``types``/``states`` mean the defaults (published runbooks); ``documents``
    restricts to those ids; ``chunking_version`` ``None`` means the version the settings'
    chunking policy produces.
    """

    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    chunking_version: str | None = None

    @property
    def effective_types(self) -> tuple[str, ...]:
        return self.types or DEFAULT_ELIGIBLE_TYPES

    @property
    def effective_states(self) -> tuple[str, ...]:
        return self.states or DEFAULT_ELIGIBLE_STATES


@dataclass(frozen=True, slots=True)
class ThresholdOverrides:
    """Per-stage minimum scores given with a request; ``None`` keeps the configured one
    (``RAGWRIGHT_THRESHOLD_*``, else the persisted calibration's)."""

    dense: float | None = None
    sparse: float | None = None
    fusion: float | None = None
    rerank: float | None = None


# Where a stage's threshold came from, highest precedence first; "none": not thresholded.
ThresholdSource = Literal["request", "settings", "calibration", "none"]
STAGES: tuple[str, ...] = ("dense", "sparse", "fusion", "rerank")


@dataclass(frozen=True, slots=True)
class CalibrationStamp:
    """Which persisted calibration (``calibration.json``) this is: when it was made, on
    which dataset (path and SHA-256), under which mode and K, and its thresholds."""

    path: str
    calibrated_at: str
    dataset: str
    dataset_sha256: str
    mode: Mode
    k: int
    threshold_dense: float | None
    threshold_sparse: float | None
    answerability_threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ThresholdOrigin:
    """Where each stage's threshold came from (request option > setting > persisted
    calibration > none) and, when the calibration supplied any, which one it was."""

    sources: Mapping[str, ThresholdSource] = field(
        default_factory=lambda: dict.fromkeys(STAGES, "none")
    )
    calibration: CalibrationStamp | None = None

    @property
    def source(self) -> str:
        """The one source of every thresholded stage, ``none`` when no stage is
        thresholded, or ``mixed`` when stages came from different sources."""
        used = {s for s in self.sources.values() if s != "none"}
        if not used:
            return "none"
        return used.pop() if len(used) == 1 else "mixed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds_source": self.source,
            "thresholds_sources": dict(self.sources),
            "calibration": self.calibration.to_dict() if self.calibration else None,
        }


@dataclass(frozen=True, slots=True)
class AppliedThresholds:
    """The thresholds a query applies and where they came from."""

    thresholds: Thresholds
    origin: ThresholdOrigin = ThresholdOrigin()


# --- chunks -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkingOptions:
    """Overrides of the configured chunking policy (``None`` keeps the setting)."""

    policy: Literal["section-paragraphs", "sentence-blocks"] | None = None
    max_words: int | None = None
    max_tokens: int | None = None
    overlap: bool | None = None

    @property
    def overridden(self) -> bool:
        """Whether any option overrides the configured policy."""
        return self != ChunkingOptions()


@dataclass(frozen=True, slots=True)
class ChunksRequest:
    """Preview the chunks sources produce (no index, no embedding)."""

    sources: tuple[Path, ...]
    chunking: ChunkingOptions = ChunkingOptions()
    document_type: str | None = None
    publication_state: str | None = None
    skip_invalid: bool = False


@dataclass(frozen=True, slots=True)
class ChunkRow:
    document_id: str
    chunk_id: str
    point_id: str
    section_id: str
    chunking_version: str
    word_count: int
    document_type: str
    publication_state: str
    paragraphs: tuple[int, ...]
    text: str
    pages: tuple[int, int] | None = None
    source_uri: str | None = None
    location: str | None = None


@dataclass(frozen=True, slots=True)
class ChunksResult:
    """The chunks, the files left out, and where each read file's metadata came from
    (``metadata``; the first ``MAX_ORIGINS`` documents, ``metadata_left_out`` more)."""

    chunking_version: str
    chunks: tuple[ChunkRow, ...]
    skipped_files: tuple[SkippedFile, ...] = ()
    skipped_documents: tuple[SkippedDocument, ...] = ()
    metadata: tuple[DocumentOrigin, ...] = ()
    metadata_left_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunking_version": self.chunking_version,
            "chunks": [_plain(asdict(c)) for c in self.chunks],
            "skipped_files": [asdict(s) for s in self.skipped_files],
            "skipped_documents": [asdict(s) for s in self.skipped_documents],
            "metadata": [asdict(m) for m in self.metadata],
            "metadata_left_out": self.metadata_left_out,
        }


# --- ingest -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file under a source directory that was not loaded, why, and the kind of why:
    ``unsupported_type``, ``not_a_document`` (README, LICENSE), ``invalid`` (metadata
    or validation, with ``--skip-invalid``), or an unreadable file's kind
    (``password_protected``, ``no_text_layer``, ``no_text``, ``corrupt``, ``garbled``)."""

    path: str
    reason: str
    kind: str = "unsupported_type"


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """Index sources: chunk, embed what changed, upsert, switch, verify.

    ``skip_invalid`` leaves out benchmark-format (BEIR) documents that break a
    validation rule and lists them in the result; authored sources always fail.
    ``tenant`` is the tenant of every document whose file names none, and is in the
    run's scope even when no document carries it. A run changes and ``prune`` deletes
    only documents of the tenants in its scope (``IngestResult.tenants``).
    ``rebuild`` empties the collection first and ingests it again from the sources
    (the recovery for a damaged index); it is refused, leaving the index as it is, when
    the sources hold no documents or any invalid one. ``documents`` (already validated,
    e.g. sent to the HTTP service) are ingested instead of reading ``sources``.
    ``grant`` (the HTTP service's, from the caller's key) bounds what the run may write,
    replace and prune (:mod:`ragwright.application.grants`); ``None``: the operator's run.
    """

    sources: tuple[Path, ...]
    chunking: ChunkingOptions = ChunkingOptions()
    document_type: str | None = None
    publication_state: str | None = None
    prune: bool = False
    add_chunking_version: bool = False
    skip_invalid: bool = False
    tenant: str | None = None
    rebuild: bool = False
    documents: tuple[SourceDocument, ...] = ()
    grant: WriteGrant | None = None

    def __post_init__(self) -> None:
        if self.documents and self.sources:
            raise RequestError("documents", "give sources or documents, not both")


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestResult(IngestReport):
    """What an ingest run did: the pipeline's :class:`~ragwright.types.IngestReport`
    (its ``changed_documents`` left empty: the use case purges the drafts citing them as
    the run goes) with the run's chunking version, embedding profile and what its
    sources skipped. ``tenants`` (``None``: untenanted) and ``sources`` are its scope:
    the only documents it could change, or prune with ``pruned``. ``shared_ids`` lists
    written documents whose id other tenants also hold (left as they are), such as a
    document whose tenant changed."""

    chunking_version: str
    embedding_profile: str
    skipped_files: tuple[SkippedFile, ...] = ()
    skipped_documents: tuple[SkippedDocument, ...] = ()
    sources: tuple[str, ...] = ()
    pruned: bool = False
    metadata: tuple[DocumentOrigin, ...] = ()
    metadata_left_out: int = 0

    @classmethod
    def of_report(cls, report: IngestReport, **run: Any) -> IngestResult:
        """``report`` with the run's own fields (``run``) added."""
        return cls(**{**record_fields(report), "changed_documents": ()}, **run)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["metadata"] = [asdict(m) for m in self.metadata]
        out["skipped_files"] = [asdict(s) for s in self.skipped_files]
        out["skipped_documents"] = [asdict(s) for s in self.skipped_documents]
        out["tenants"] = list(self.tenants)
        out["sources"] = list(self.sources)
        out["shared_ids"] = [
            {**asdict(s), "other_tenants": list(s.other_tenants)} for s in self.shared_ids
        ]
        return {name: out[name] for name in INGEST_RESULT_KEYS}


# The JSON form of an ingest run, in the order its keys have always been printed
# (``ragwright ingest --json``, ``POST /v1/ingestions``); not ``changed_documents``.
INGEST_RESULT_KEYS = (
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
)


# --- status -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """What the index holds (every chunking version).

    ``tenants`` limits the documents and point counts to those tenants (``None`` in it
    means untenanted documents) and ``documents`` to those ids; ``None`` shows every
    tenant or document (the operator's view). The HTTP service passes the caller's
    tenant and allowlist from its key.
    """

    tenants: tuple[str | None, ...] | None = None
    documents: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DocumentStatus:
    """One document (tenant and id) under one chunking version."""

    document_id: str
    title: str
    document_type: str
    publication_state: str
    chunking_version: str
    tenant: str | None
    live_chunks: int
    staged_chunks: int


@dataclass(frozen=True, slots=True)
class VersionStatus:
    """One chunking version in the collection and whether queries use it."""

    chunking_version: str
    documents: int
    live_chunks: int
    queried: bool


@dataclass(frozen=True, slots=True)
class StatusResult:
    collection: str
    embedding_profile: str
    dimensions: int
    distance: str
    query_chunking_version: str
    versions: tuple[VersionStatus, ...]
    documents: tuple[DocumentStatus, ...]
    points: Mapping[str, int]
    calibration: CalibrationStamp | None = None

    @property
    def chunking_versions(self) -> tuple[str, ...]:
        return tuple(v.chunking_version for v in self.versions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "embedding_profile": self.embedding_profile,
            "dimensions": self.dimensions,
            "distance": self.distance,
            "query_chunking_version": self.query_chunking_version,
            "chunking_versions": list(self.chunking_versions),
            "versions": [asdict(v) for v in self.versions],
            "documents": [asdict(d) for d in self.documents],
            "points": dict(self.points),
            "calibration": self.calibration.to_dict() if self.calibration else None,
        }


# --- verify -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerifyRequest:
    """Read every point of the index back and check it."""


@dataclass(frozen=True, slots=True)
class VerifyProblem:
    """One thing that did not read back: ``point_id`` ``None`` for the index as a whole;
    ``part`` as in :class:`~ragwright.errors.IndexDamaged` (or ``payload`` for a payload
    that reads but breaks a rule)."""

    point_id: str | None
    part: str
    detail: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """``committed_points`` is the count the last clean writer recorded (``None``:
    unknown); ``points`` the count the engine reports; ``checked`` the points whose
    payload and vectors all read back valid."""

    collection: str
    committed_points: int | None
    points: int
    checked: int
    problems: tuple[VerifyProblem, ...]

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "committed_points": self.committed_points,
            "points": self.points,
            "checked": self.checked,
            "damaged": self.damaged,
            "problems": [asdict(p) for p in self.problems],
        }


# --- search -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """Rank eligible evidence for a question.

    ``tenant`` is the caller's tenant and ``allowed_documents`` its allowlist (``None``:
    every document of the tenant), both from trusted context (an API key, the operator's
    command line), never from the question.
    """

    question: str
    k: int = 5
    mode: Mode = "hybrid"
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    thresholds: ThresholdOverrides = ThresholdOverrides()
    allowed_documents: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_question(self.question)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked chunk; ``revision`` is its document's revision as stored (every hit of
    one document in one result carries the same one, even during an ingestion)."""

    rank: int
    document_id: str
    chunk_id: str
    chunking_version: str
    revision: str
    document_type: str
    publication_state: str
    score: float
    score_kind: ScoreKind
    text: str
    dense_score: float | None = None
    sparse_score: float | None = None
    fused_score: float | None = None
    rerank_score: float | None = None
    source_uri: str | None = None
    pages: tuple[int, int] | None = None
    location: str | None = None
    """The file and pages a reader finds it at: ``runbook.pdf p. 3``."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked eligible evidence; ``excluded_versions`` counts live chunks of other
    chunking versions the query could not see (by version only)."""

    question: str
    mode: Mode
    score_kind: ScoreKind
    chunking_version: str
    hits: tuple[SearchHit, ...]
    thresholds: Thresholds
    excluded_versions: Mapping[str, int] = field(default_factory=dict)
    threshold_origin: ThresholdOrigin = ThresholdOrigin()

    @property
    def no_eligible_evidence(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "mode": self.mode,
            "score_kind": self.score_kind,
            "chunking_version": self.chunking_version,
            "thresholds": asdict(self.thresholds),
            **self.threshold_origin.to_dict(),
            "no_eligible_evidence": self.no_eligible_evidence,
            "excluded_versions": dict(self.excluded_versions),
            "hits": [asdict(h) for h in self.hits],
        }


# --- answer -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerRequest:
    """Answer a question from eligible evidence.

    ``history`` holds the conversation's earlier messages (user, assistant, alternating,
    oldest first); they enter the request through the assembly policy's history share
    (``+history=S``; 0.25 when the policy names none). ``current_revisions`` (document id
    → revision, from the caller's system of record) is what ``+prefer-current-revision``
    compares the stored revision of each candidate with. ``deadline_seconds`` ``None``
    uses the ``answer_deadline`` setting. ``check_support`` ``None`` uses the
    ``answer_support_check`` setting (on by default): an answer its cited evidence does
    not support ends as ``unsupported``, never ``answered`` (it applies to the
    ``generated`` style; quoted answers are evidence verbatim). ``style`` ``None`` uses
    the ``answer_style`` setting (``auto``: quoted for the local model, generated for
    hosted ones).
    """

    question: str
    k: int = 5
    mode: Mode = "hybrid"
    policy: str = "seed-baseline"
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    history: tuple[ChatMessage, ...] = ()
    current_revisions: Mapping[str, str] | None = None
    preview: bool = False
    check_support: bool | None = None
    deadline_seconds: float | None = None
    thresholds: ThresholdOverrides = ThresholdOverrides()
    style: AnswerStyle | None = None
    allowed_documents: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_question(self.question)
        if self.style is not None and self.style not in ANSWER_STYLES:
            raise RequestError(
                "style", f"must be one of {', '.join(ANSWER_STYLES)}, got {self.style!r}"
            )


# --- evaluate / calibrate / compare / report ---------------------------------------


@dataclass(frozen=True, slots=True)
class Dataset:
    """A JSONL dataset file, or a BEIR directory with a qrels split."""

    path: Path
    beir: bool = False
    split: str = "test"


@dataclass(frozen=True, slots=True)
class EvaluateRequest:
    """Score retrieval on labelled questions and persist the run; ``report`` also writes
    report.html, compared with the earlier run ``compare`` names (which needs ``report``).

    ``answers`` also runs the answer use case for every case, one after another, under
    the run's mode, evidence, tenant and thresholds, in answer style ``style`` (``None``:
    the configured default), and scores the answers (docs/evaluation.md). ``style``
    without ``answers`` is refused: it would change nothing.
    """

    dataset: Dataset
    mode: Mode = "hybrid"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    thresholds: ThresholdOverrides = ThresholdOverrides()
    with_text: bool = False
    report: bool = False
    compare: str | None = None
    answers: bool = False
    style: AnswerStyle | None = None

    def __post_init__(self) -> None:
        if self.compare is not None and not self.report:
            raise RequestError(
                "compare", "needs report (--report): the comparison is part of the HTML report"
            )
        if self.style is not None and not self.answers:
            raise RequestError("style", "applies only to answer runs (answers / --answers)")


@dataclass(frozen=True, slots=True)
class EvaluateResult:
    execution_id: str
    path: Path
    summary: Mapping[str, Any]
    categories: Mapping[str, Any]
    unsupported: Mapping[str, Any]
    report_path: Path | None = None
    thresholds: Thresholds = Thresholds()
    threshold_origin: ThresholdOrigin = ThresholdOrigin()
    answers: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "path": str(self.path),
            "report": str(self.report_path) if self.report_path else None,
            "thresholds": asdict(self.thresholds),
            **self.threshold_origin.to_dict(),
            "summary": dict(self.summary),
            "categories": dict(self.categories),
            "unsupported": {k: v for k, v in self.unsupported.items() if k != "results"},
            "answers": dict(self.answers) if self.answers is not None else None,
        }


@dataclass(frozen=True, slots=True)
class CalibrateRequest:
    """Sweep dense/BM25 thresholds against unsupported questions.

    The recommendation is judged on held-out questions: ``holdout`` (a separate
    dataset) or else a stratified ``folds``-fold split of ``dataset``. Fewer than
    :data:`~ragwright.pipeline.calibrate.MIN_UNSUPPORTED` unsupported questions are
    refused unless ``force``. ``write`` persists the recommendation beside the index
    (``calibration.json``), replacing any earlier one.
    """

    dataset: Dataset
    mode: Mode = "hybrid"
    k: int = 5
    evidence: EvidenceFilter = EvidenceFilter()
    tenant: str | None = None
    max_recall_loss: float = 0.0
    max_candidates: int = 8
    folds: int = 5
    holdout: Dataset | None = None
    force: bool = False
    write: bool = False
    max_answerable_loss: float = 0.1


@dataclass(frozen=True, slots=True)
class ClearCalibrationRequest:
    """Remove the persisted calibration (``calibration.json`` beside the index)."""


@dataclass(frozen=True, slots=True)
class ClearCalibrationResult:
    path: Path
    removed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "removed": self.removed}


@dataclass(frozen=True, slots=True)
class AnswerabilityFigures:
    """What an answerability threshold declines on a set of questions."""

    answerable: int
    unsupported: int
    answerable_declined: int
    unsupported_declined: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "answerable_declined_rate": _rate(self.answerable_declined, self.answerable),
            "unsupported_declined_rate": _rate(self.unsupported_declined, self.unsupported),
        }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass(frozen=True, slots=True)
class AnswerabilityResult:
    """The recommended answerability threshold (``None``: no threshold declines an
    unsupported question within ``max_answerable_loss``), chosen under the recommended
    retrieval thresholds, with its in-sample and held-out figures."""

    threshold: float | None
    max_answerable_loss: float
    style: Literal["quoted", "evidence"]
    in_sample: AnswerabilityFigures
    held_out: AnswerabilityFigures

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "max_answerable_loss": self.max_answerable_loss,
            "style": self.style,
            "in_sample": self.in_sample.to_dict(),
            "held_out": self.held_out.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class HeldOutResult:
    """The recommendation rule on questions it was not chosen on: ``k-fold`` (pooled
    over ``folds`` folds, ``fold_thresholds`` recommended for each) or ``holdout``
    (``dataset``, under the one recommendation)."""

    method: Literal["k-fold", "holdout"]
    folds: int | None
    dataset: str | None
    answerable: int
    unsupported: int
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int
    fold_thresholds: tuple[tuple[float | None, float | None], ...]

    def to_dict(self, k: int) -> dict[str, Any]:
        return {
            "method": self.method,
            "folds": self.folds,
            "dataset": self.dataset,
            "answerable": self.answerable,
            "unsupported": self.unsupported,
            "false_acceptance_rate": round(self.false_acceptance_rate, 4),
            f"recall@{k}": round(self.recall, 4),
            f"ndcg@{k}": round(self.ndcg, 4),
            "refused_answerable": self.refused_answerable,
            "fold_thresholds": [
                {"threshold_dense": dense, "threshold_sparse": sparse}
                for dense, sparse in self.fold_thresholds
            ],
        }


@dataclass(frozen=True, slots=True)
class CalibrationRowResult:
    threshold_dense: float | None
    threshold_sparse: float | None
    false_acceptance_rate: float
    recall: float
    ndcg: float
    refused_answerable: int
    recommended: bool


@dataclass(frozen=True, slots=True)
class CalibrateResult:
    mode: Mode
    k: int
    answerable: int
    unsupported: int
    rows: tuple[CalibrationRowResult, ...]
    held_out: HeldOutResult | None = None
    forced: bool = False
    written: Path | None = None
    answerability: AnswerabilityResult | None = None

    @property
    def recommended(self) -> CalibrationRowResult:
        return next(r for r in self.rows if r.recommended)

    def to_dict(self) -> dict[str, Any]:
        rows = [_calibration_row(r, self.k) for r in self.rows]
        return {
            "mode": self.mode,
            "k": self.k,
            "answerable": self.answerable,
            "unsupported": self.unsupported,
            "rows": rows,
            "recommended": next(r for r in rows if r["recommended"]),
            "held_out": self.held_out.to_dict(self.k) if self.held_out else None,
            "forced": self.forced,
            "written": str(self.written) if self.written else None,
            "answerability": self.answerability.to_dict() if self.answerability else None,
        }


@dataclass(frozen=True, slots=True)
class CompareRequest:
    """Per-case changes of one metric at one cutoff between two persisted runs."""

    before: str
    after: str
    k: int = 10
    metric: Literal["precision", "recall", "reciprocal_rank", "ndcg"] = "ndcg"


@dataclass(frozen=True, slots=True)
class CaseChangeResult:
    case_id: str
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class CompareResult:
    k: int
    metric: str
    regressions: tuple[CaseChangeResult, ...]
    improvements: tuple[CaseChangeResult, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "metric": self.metric,
            "regressions": [asdict(c) for c in self.regressions],
            "improvements": [asdict(c) for c in self.improvements],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """Render report.html for a persisted run; ``compare`` names an earlier run to show
    summary deltas and per-case changes against."""

    run: str
    compare: str | None = None


@dataclass(frozen=True, slots=True)
class ReportResult:
    execution_id: str
    path: Path
    compared_with: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "path": str(self.path),
            "compared_with": self.compared_with,
        }


# --- API keys -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddKeyRequest:
    """Make an API key for the HTTP service.

    ``tenant`` has no default: a key for untenanted documents (``None``) must be asked
    for as plainly as one for a tenant. ``scopes`` (at least one of
    :data:`~ragwright.application.keys.SCOPES`) say what the key may do; ``documents``
    restricts it to those ids (empty: every document of the tenant); ``types`` and
    ``states`` are the eligibility it may use (empty: the server's defaults). Refused on
    construction, naming the field, when a key so made could not work as meant.
    """

    tenant: str | None
    scopes: tuple[str, ...]
    documents: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        check_grant(
            tenant=self.tenant,
            scopes=self.scopes,
            documents=self.documents,
            types=self.types,
            states=self.states,
            name=self.name,
        )


@dataclass(frozen=True, slots=True)
class AddKeyResult:
    """The new key and its secret: the one time the secret is available."""

    key: ApiKey
    secret: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.secret, **self.key.to_dict()}


@dataclass(frozen=True, slots=True)
class ListKeysResult:
    """Every key, revoked ones included, oldest first (never a secret or a digest)."""

    keys: tuple[ApiKey, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"keys": [key.to_dict() for key in self.keys]}


@dataclass(frozen=True, slots=True)
class RevokeKeyRequest:
    """Revoke the key with this id; revoking a revoked key keeps its first date."""

    key_id: str

    def __post_init__(self) -> None:
        if not self.key_id.strip():
            raise RequestError("key_id", "must not be empty ('keys list' shows the ids)")


@dataclass(frozen=True, slots=True)
class RevokeKeyResult:
    """The revoked key (``revoked_at`` set)."""

    key: ApiKey

    def to_dict(self) -> dict[str, Any]:
        return self.key.to_dict()


def _calibration_row(row: CalibrationRowResult, k: int) -> dict[str, Any]:
    return {
        "threshold_dense": row.threshold_dense,
        "threshold_sparse": row.threshold_sparse,
        "false_acceptance_rate": round(row.false_acceptance_rate, 4),
        f"recall@{k}": round(row.recall, 4),
        f"ndcg@{k}": round(row.ndcg, 4),
        "refused_answerable": row.refused_answerable,
        "recommended": row.recommended,
    }


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

"""Requests and results of a question's use cases, search and answer, and the checks
every question passes (length, plain text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragwright.application.left_out import Searched, VersionSource
from ragwright.application.requests.evidence import (
    EvidenceFilter,
    ThresholdOrigin,
    ThresholdOverrides,
)
from ragwright.chat.contract import ChatMessage
from ragwright.core.answers import ANSWER_STYLES, AnswerStyle
from ragwright.errors import RequestError
from ragwright.pipeline.retrieve import Mode, Thresholds

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
    """Ranked eligible evidence; ``chunking_version_source`` says why the query read its
    chunking version, ``searched`` which types and states it searched and why
    (:class:`~ragwright.application.left_out.Searched`); ``excluded_versions``,
    ``excluded_types`` and ``excluded_states`` count live chunks the query could not see
    by their chunking version, document type or publication state only
    (:class:`~ragwright.application.left_out.LeftOut`)."""

    question: str
    mode: Mode
    score_kind: ScoreKind
    chunking_version: str
    hits: tuple[SearchHit, ...]
    thresholds: Thresholds
    excluded_versions: Mapping[str, int] = field(default_factory=dict)
    threshold_origin: ThresholdOrigin = ThresholdOrigin()
    chunking_version_source: VersionSource = "default"
    excluded_types: Mapping[str, int] = field(default_factory=dict)
    excluded_states: Mapping[str, int] = field(default_factory=dict)
    searched: Searched = field(default_factory=Searched)

    @property
    def no_eligible_evidence(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "mode": self.mode,
            "score_kind": self.score_kind,
            "chunking_version": self.chunking_version,
            "chunking_version_source": self.chunking_version_source,
            "thresholds": asdict(self.thresholds),
            **self.threshold_origin.to_dict(),
            "no_eligible_evidence": self.no_eligible_evidence,
            "searched": self.searched.to_dict(),
            "excluded_versions": dict(self.excluded_versions),
            "excluded_types": dict(self.excluded_types),
            "excluded_states": dict(self.excluded_states),
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

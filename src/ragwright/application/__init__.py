"""The application layer: typed requests, one use case each, typed results.

Entry points (the ``ragwright`` command, the HTTP service) build an :class:`Application`
with ``ragwright.runtime.build_application`` and call it; they hold no business logic.
"""

from ragwright.application.components import ChatSession, Components, LoadedSources
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.requests import (
    DEFAULT_ELIGIBLE_STATES,
    DEFAULT_ELIGIBLE_TYPES,
    AnswerRequest,
    CalibrateRequest,
    CalibrateResult,
    ChunkingOptions,
    ChunksRequest,
    ChunksResult,
    CompareRequest,
    CompareResult,
    Dataset,
    EvaluateRequest,
    EvaluateResult,
    EvidenceFilter,
    IngestRequest,
    IngestResult,
    ReportRequest,
    ReportResult,
    SearchRequest,
    SearchResult,
    SkippedFile,
    StatusRequest,
    StatusResult,
    ThresholdOverrides,
    VerifyProblem,
    VerifyRequest,
    VerifyResult,
)
from ragwright.application.service import Application, score_kind
from ragwright.chat.contract import ChatMessage

__all__ = [
    "DEFAULT_ELIGIBLE_STATES",
    "DEFAULT_ELIGIBLE_TYPES",
    "AnswerOutcome",
    "AnswerRequest",
    "Application",
    "CalibrateRequest",
    "CalibrateResult",
    "ChatMessage",
    "ChatSession",
    "ChunkingOptions",
    "ChunksRequest",
    "ChunksResult",
    "CompareRequest",
    "CompareResult",
    "Components",
    "Dataset",
    "EvaluateRequest",
    "EvaluateResult",
    "EvidenceFilter",
    "IngestRequest",
    "IngestResult",
    "LoadedSources",
    "ReportRequest",
    "ReportResult",
    "SearchRequest",
    "SearchResult",
    "SkippedFile",
    "StatusRequest",
    "StatusResult",
    "ThresholdOverrides",
    "VerifyProblem",
    "VerifyRequest",
    "VerifyResult",
    "score_kind",
]

"""The application layer: typed requests, one use case each, typed results.

Entry points (the ``ragwright`` command, the HTTP service) build an :class:`Application`
with ``ragwright.runtime.build_application`` and call it; they hold no business logic.
"""

from ragwright.application.answering import score_kind
from ragwright.application.components import ChatSession, Components, LoadedSources, Workload
from ragwright.application.facade import Application
from ragwright.application.keys import SCOPES, ApiKey, KeyStore
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.requests.calibration import (
    AnswerabilityFigures,
    AnswerabilityResult,
    CalibrateRequest,
    CalibrateResult,
    ClearCalibrationRequest,
    ClearCalibrationResult,
    HeldOutResult,
)
from ragwright.application.requests.corpus import (
    ChunkingOptions,
    ChunksRequest,
    ChunksResult,
    IngestRequest,
    IngestResult,
    SkippedFile,
    StatusRequest,
    StatusResult,
    VerifyProblem,
    VerifyRequest,
    VerifyResult,
)
from ragwright.application.requests.evaluation import (
    CompareRequest,
    CompareResult,
    Dataset,
    EvaluateRequest,
    EvaluateResult,
    ReportRequest,
    ReportResult,
)
from ragwright.application.requests.evidence import (
    DEFAULT_ELIGIBLE_STATES,
    DEFAULT_ELIGIBLE_TYPES,
    AppliedThresholds,
    CalibrationStamp,
    EvidenceFilter,
    ThresholdOrigin,
    ThresholdOverrides,
)
from ragwright.application.requests.keys import (
    AddKeyRequest,
    AddKeyResult,
    ListKeysResult,
    RevokeKeyRequest,
    RevokeKeyResult,
)
from ragwright.application.requests.questions import AnswerRequest, SearchRequest, SearchResult
from ragwright.chat.contract import ChatMessage

__all__ = [
    "DEFAULT_ELIGIBLE_STATES",
    "DEFAULT_ELIGIBLE_TYPES",
    "SCOPES",
    "AddKeyRequest",
    "AddKeyResult",
    "AnswerOutcome",
    "AnswerRequest",
    "AnswerabilityFigures",
    "AnswerabilityResult",
    "ApiKey",
    "Application",
    "AppliedThresholds",
    "CalibrateRequest",
    "CalibrateResult",
    "CalibrationStamp",
    "ChatMessage",
    "ChatSession",
    "ChunkingOptions",
    "ChunksRequest",
    "ChunksResult",
    "ClearCalibrationRequest",
    "ClearCalibrationResult",
    "CompareRequest",
    "CompareResult",
    "Components",
    "Dataset",
    "EvaluateRequest",
    "EvaluateResult",
    "EvidenceFilter",
    "HeldOutResult",
    "IngestRequest",
    "IngestResult",
    "KeyStore",
    "ListKeysResult",
    "LoadedSources",
    "ReportRequest",
    "ReportResult",
    "RevokeKeyRequest",
    "RevokeKeyResult",
    "SearchRequest",
    "SearchResult",
    "SkippedFile",
    "StatusRequest",
    "StatusResult",
    "ThresholdOrigin",
    "ThresholdOverrides",
    "VerifyProblem",
    "VerifyRequest",
    "VerifyResult",
    "Workload",
    "score_kind",
]

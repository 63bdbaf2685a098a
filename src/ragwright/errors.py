"""The one exception tree of ragwright.

Every error the project raises on purpose derives from :class:`RagwrightError` and
carries the fields a caller needs to act on it, so nobody has to parse messages.
Provider failures of every kind (chat, embedding, rerank) share one base and one
:class:`FailureCategory`; the category alone decides whether a retry may help
(:attr:`FailureCategory.retryable`)::

    RagwrightError
    ├── ConfigError(setting, reason)            a setting is missing or invalid
    ├── StorageError(path, reason)              a file system refused (full, read-only, denied)
    ├── RequestError(field, rule)               a request field breaks a rule (e.g. question)
    ├── SourceError(source, reason)             a source file cannot be read or parsed
    │   ├── UnreadableSource(source, kind, reason)  a file whose text cannot be read
    │   │                                       (password, no text layer, corrupt, garbled,
    │   │                                       over a conversion limit)
    │   └── SourceProblems(source, problems)    every problem of every file of one pass
    │       ├── NothingReadable(source, problems)  every file left out, each with its reason
    │       └── DocumentProblems(..., errors)    and of every document a run cannot chunk or embed
    ├── ConversionCancelled                     the caller went away while a file converted
    ├── DocumentError(document_id, field, rule) a document breaks a validation rule
    ├── ChunkingError(document_id, section_id, paragraph_index, reason)
    ├── EmbeddingError                          the embedding stage failed
    │   ├── ArtifactMismatch(path, expected, actual)   bundled model file changed
    │   ├── InputTooLong(item, tokens, limit)   rejected before embedding
    │   ├── DimensionMismatch(expected, actual)
    │   └── EmbeddingProviderError              also a ProviderError (below)
    ├── ProviderError(provider, category, detail, retry_after)   a provider call failed
    │   ├── ChatError                           a chat-model operation failed
    │   ├── EmbeddingProviderError              an embedding call failed
    │   └── RerankError                         a rerank call failed
    ├── VectorIndexError                        the vector index failed
    │   ├── ContractMismatch(field, expected, actual)
    │   ├── IndexBusy(path, holder)             another process (or ingestion) holds it
    │   ├── IndexNotFound(location)             nothing was ingested there yet
    │   ├── IndexDamaged(location, part, detail) stored data no longer reads back
    │   ├── IndexUnavailable(location, reason)  the index server cannot be reached
    │   ├── PayloadError(point_id, field, rule) a stored payload is not what we wrote
    │   └── ReadBackError(point_id, reason)     a written point did not read back
    ├── CapacityCoolingDown(remaining)          the capacity pool is cooling down after a 429
    ├── AssemblyError(reason)                   context cannot be assembled as asked
    ├── AnswerContractError(reason, detail)     a model answer breaks the JSON contract
    ├── EvaluationError(reason)                 an evaluation cannot run or score a case
    │   ├── EvaluationInterrupted(execution_id, directory, answered, cases)
    │   │                                       an answer run was interrupted (Ctrl-C)
    │   └── MetricInputError                    a ranking or judgments cannot be scored
    ├── CalibrationError(path, field, rule)     a persisted calibration is unreadable or stale
    ├── ServiceError(url, status, detail)       a ragwright service refused or failed a call
    ├── IngestItemFailed(run_id, item, worker, detail)  a queued ingestion's work item failed
    ├── IngestRunExpired(run_id, outstanding, items)  its deadline passed, items unfinished
    └── JobError                                a durable job operation was refused
        ├── IdempotencyConflict(idempotency_key, job_id)  key reused for another input
        └── JobNotFound(job_id)
"""

from __future__ import annotations

import enum
from pathlib import Path


class RagwrightError(Exception):
    """Root of every error ragwright raises on purpose."""


class ConfigError(RagwrightError):
    """A setting is missing or invalid; ``setting`` names it as the user spells it."""

    def __init__(self, setting: str, reason: str) -> None:
        self.setting = setting
        self.reason = reason
        super().__init__(f"setting {setting!r}: {reason}")


class StorageError(RagwrightError):
    """A file system refused an operation (disk full, read-only, permission denied);
    ``path`` names where, ``reason`` what and how to recover."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class RequestError(RagwrightError):
    """A use case's request breaks a rule; ``field`` names it as the caller spells it."""

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class SourceError(RagwrightError):
    """A source file cannot be read or parsed into documents."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


class UnreadableKind(enum.StrEnum):
    """Why the text of a source file cannot be read (stable: callers branch on it)."""

    PASSWORD_PROTECTED = "password_protected"
    NO_TEXT_LAYER = "no_text_layer"
    NO_TEXT = "no_text"
    CORRUPT = "corrupt"
    GARBLED = "garbled"
    UNSUPPORTED_TYPE = "unsupported_type"
    OVER_LIMIT = "over_limit"
    NOT_DOCUMENTS = "not_documents"


class UnreadableSource(SourceError):
    """A source file whose text cannot be read; ``kind`` says why, ``reason`` says how
    to fix it."""

    def __init__(self, source: str, kind: UnreadableKind, reason: str) -> None:
        self.kind = kind
        super().__init__(source, reason)


class ConversionCancelled(RagwrightError):
    """The caller went away (an HTTP client disconnected) while its file converted: the
    conversion was stopped and nothing was read. Not a problem of the file."""


class SourceProblems(SourceError):
    """Every problem a pass over the sources found, one ``(file, problem)`` a line.

    Raised at the end of the pass, before anything is written, so one run names them
    all (``--skip-invalid`` leaves those files out instead)."""

    def __init__(
        self, source: str, problems: tuple[tuple[str, str], ...], lead: str | None = None
    ) -> None:
        self.problems = problems
        lines = "\n".join(f"  {path}: {problem}" for path, problem in problems)
        count = len(problems)
        lead = lead or (
            f"{count} problem{'s' if count != 1 else ''} in the sources "
            "(nothing was written; --skip-invalid leaves these files out)"
        )
        super().__init__(source, f"{lead}:\n{lines}")


class NothingReadable(SourceProblems):
    """Every file of the sources was left out (each with its reason): a run of no
    document would read as success."""

    def __init__(self, source: str, problems: tuple[tuple[str, str], ...]) -> None:
        super().__init__(source, problems, "no document could be read; every file was left out")


class DocumentProblems(SourceProblems):
    """Documents the validation pass of a run cannot chunk or embed, each named (and the
    sources' own problems, when the pass met both); ``errors`` are the documents' typed
    errors in the order met."""

    def __init__(
        self,
        source: str,
        problems: tuple[tuple[str, str], ...],
        errors: tuple[ChunkingError | InputTooLong, ...],
    ) -> None:
        self.errors = errors
        super().__init__(source, problems)


class DocumentError(RagwrightError):
    """A source document breaks a validation rule."""

    def __init__(
        self, document_id: str, field: str, rule: str, *, source: str | None = None
    ) -> None:
        self.document_id = document_id
        self.field = field
        self.rule = rule
        self.source = source
        """The file the document came from, when it came from one."""
        where = f"{source}: " if source else ""
        super().__init__(f"{where}document {document_id!r}, field {field!r}: {rule}")


class ChunkingError(RagwrightError):
    """A section cannot be chunked under the policy (never silently cut)."""

    def __init__(
        self, document_id: str, section_id: str, paragraph_index: int, reason: str
    ) -> None:
        self.document_id = document_id
        self.section_id = section_id
        self.paragraph_index = paragraph_index
        self.reason = reason
        super().__init__(
            f"document {document_id!r}, section {section_id!r}, "
            f"paragraph {paragraph_index}: {reason}"
        )


class EmbeddingError(RagwrightError):
    """The embedding stage failed."""


class ArtifactMismatch(EmbeddingError):
    """A bundled model file does not have the digest the profile declares."""

    def __init__(self, path: str, expected: str, actual: str) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"model artifact {path} has sha256 {actual}, the profile expects {expected}; "
            "refusing to embed with an unverified model"
        )


class InputTooLong(EmbeddingError):
    """An embedding input exceeds the profile's token limit (no silent truncation)."""

    def __init__(
        self,
        item: str,
        tokens: int,
        limit: int,
        *,
        document_id: str | None = None,
        chunk_id: str | None = None,
    ) -> None:
        self.item = item
        self.tokens = tokens
        self.limit = limit
        self.document_id = document_id
        """The source document of an ingestion input (``None`` for other inputs)."""
        self.chunk_id = chunk_id
        super().__init__(
            f"{item}: embedding input has {tokens} tokens, the profile allows {limit}; "
            "use a smaller chunk budget or a profile with a larger limit"
        )


class DimensionMismatch(EmbeddingError):
    """A provider returned a vector of the wrong size."""

    def __init__(self, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"expected {expected}-dimensional vectors, received {actual}")


class FailureCategory(enum.Enum):
    """Stable provider failure categories; branch on these, never on message text."""

    TRANSIENT = "transient"
    THROTTLED = "throttled"
    TIMEOUT = "timeout"
    DEADLINE_EXHAUSTED = "deadline_exhausted"
    CANCELLED = "cancelled"
    INVALID_CONFIGURATION = "invalid_configuration"
    UNSUPPORTED_OPTION = "unsupported_option"
    INVALID_INPUT = "invalid_input"
    INVALID_OUTPUT = "invalid_output"
    REFUSAL = "refusal"
    CAPACITY = "capacity"
    INTERRUPTED = "interrupted"  # a stream failed after text reached the caller

    @property
    def retryable(self) -> bool:
        """Whether another attempt may succeed, time permitting (see :data:`RETRYABLE`)."""
        return self in RETRYABLE


RETRYABLE = frozenset(
    {FailureCategory.TRANSIENT, FailureCategory.THROTTLED, FailureCategory.TIMEOUT}
)
"""Categories a retry may cure: the provider was briefly unavailable, asked us to slow
down, or did not answer in time. A timeout is retried only while the operation's
deadline leaves room; an exhausted deadline, cancellation, an interrupted stream and
every configuration, input or output failure are final."""


class VectorIndexError(RagwrightError):
    """The vector index failed."""


class ContractMismatch(VectorIndexError):
    """An existing collection does not match the configured contract."""

    def __init__(self, field: str, expected: object, actual: object) -> None:
        self.field = field
        self.expected = expected
        self.actual = actual
        message = (
            f"collection contract mismatch on {field}: expected {expected!r}, found {actual!r}"
        )
        if field == "embedding_profile_id":
            message += (
                f" (the index was built with embedding profile {actual!r}, the settings select"
                f" {expected!r}: select the index's profile with RAGWRIGHT_EMBEDDING_PROVIDER,"
                " or ingest into a new index with another RAGWRIGHT_COLLECTION or RAGWRIGHT_HOME)"
            )
        super().__init__(message)


class IndexBusy(VectorIndexError):
    """The embedded index is held by another process (one process per path), or, in a
    process that holds it for every request, by another ingestion (``holder``)."""

    def __init__(self, path: str, holder: str = "another process") -> None:
        self.path = path
        self.holder = holder
        hint = (
            " (if it is 'ragwright serve', ingest through it with 'ragwright ingest "
            "--server URL' and query it over HTTP)"
            if holder == "another process"
            else ""
        )
        super().__init__(f"the embedded index at {path} is in use by {holder}{hint}")


class IndexNotFound(VectorIndexError):
    """A read-only command found no collection (run ``ragwright ingest`` first)."""

    def __init__(self, location: str) -> None:
        self.location = location
        super().__init__(f"no index at {location}: run 'ragwright ingest' first")


class IndexDamaged(VectorIndexError):
    """The index no longer holds what was committed: a count, a stored part or its
    metadata does not read back. ``part`` names what is damaged (``contract.json``,
    ``manifest.json``, ``shard``, ``id tracker``, ``payload storage``, ``dense vectors``,
    ``sparse vectors``); the sources are the truth, so the recovery is a rebuild."""

    def __init__(self, location: str, part: str, detail: str) -> None:
        self.location = location
        self.part = part
        self.detail = detail
        super().__init__(
            f"the index at {location} is damaged ({part}: {detail}); "
            "recover with 'ragwright ingest SOURCES --rebuild'"
        )


class IndexUnavailable(VectorIndexError):
    """The configured index server cannot be reached (it is required: nothing can run)."""

    def __init__(self, location: str, reason: str) -> None:
        self.location = location
        self.reason = reason
        super().__init__(f"the index at {location} cannot be reached: {reason}")


class PayloadError(VectorIndexError):
    """A stored payload fails validation; reading fails closed."""

    def __init__(self, point_id: str, field: str, rule: str) -> None:
        self.point_id = point_id
        self.field = field
        self.rule = rule
        super().__init__(f"point {point_id}: payload field {field!r} {rule}")


class ReadBackError(VectorIndexError):
    """A written point did not read back as written."""

    def __init__(self, point_id: str, reason: str) -> None:
        self.point_id = point_id
        self.reason = reason
        super().__init__(f"read-back failed for point {point_id}: {reason}")


class ProviderError(RagwrightError):
    """A provider call failed, classified into a stable :class:`FailureCategory`.

    The one base of chat, embedding and rerank provider failures. Classification from
    HTTP status and exception type lives in ``adapters/http.py``; whether to retry
    follows from ``category`` alone. ``retry_after`` (seconds) is set when the provider
    said when to come back.

    Every subclass keeps this constructor, so a layer can re-raise a failure under
    another category with ``type(error)(error.provider, category, detail)``.
    """

    def __init__(
        self,
        provider: str,
        category: FailureCategory,
        detail: str = "",
        *,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.category = category
        self.detail = detail
        self.retry_after = retry_after
        super().__init__(f"{provider}: {category.value}" + (f": {detail}" if detail else ""))


class ChatError(ProviderError):
    """A chat-model operation failed."""


class EmbeddingProviderError(ProviderError, EmbeddingError):
    """An embedding provider call failed (also an :class:`EmbeddingError`)."""


class RerankError(ProviderError):
    """A rerank provider call failed."""


class CapacityCoolingDown(RagwrightError):
    """A capacity pool refused a lease because a provider throttled recently.

    Raised by :meth:`~ragwright.protocols.CapacityPool.try_acquire` instead of returning
    ``None`` so the refusal and the time it lasts come from one atomic check; the gate
    turns it into a ``throttled`` :class:`ChatError` whose ``retry_after`` is
    ``remaining`` (seconds).
    """

    def __init__(self, remaining: float) -> None:
        self.remaining = remaining
        super().__init__(f"model capacity is cooling down for {remaining:.2f} s after throttling")


class AssemblyError(RagwrightError):
    """Context cannot be assembled: instructions and question alone exceed the budget, or
    a candidate's text does not have the chunk format."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class AnswerContractError(RagwrightError):
    """A model answer breaks the answer contract; ``reason`` is a stable code."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"answer contract: {reason}: {detail}")


class EvaluationError(RagwrightError):
    """An evaluation cannot run (bad dataset, labels outside the corpus) or score a case."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class EvaluationInterrupted(EvaluationError):
    """An answer run was interrupted (Ctrl-C); the answers given so far are kept in the
    run's directory and ``eval run ... --resume`` answers the rest."""

    def __init__(self, execution_id: str, directory: Path, answered: int, cases: int) -> None:
        self.execution_id = execution_id
        self.directory = directory
        self.answered = answered
        self.cases = cases
        super().__init__(
            f"interrupted: {answered} of {cases} cases are answered and saved in {directory};"
            f" the same `eval run` with `--resume {execution_id}` answers the rest"
        )


class MetricInputError(EvaluationError):
    """A ranking or judgments that cannot be scored (distinct from a scored miss)."""


class CalibrationError(RagwrightError):
    """The persisted calibration (``calibration.json`` beside the index) cannot be used:
    damaged, hand-edited out of shape, or made under another embedding or lexical
    profile. ``field`` names the record's field (``record`` for the file as a whole)."""

    def __init__(self, path: str, field: str, rule: str) -> None:
        self.path = path
        self.field = field
        self.rule = rule
        super().__init__(
            f"{path}: {field}: {rule} (calibrate again with 'eval calibrate DATASET --write' "
            "or drop it with 'eval calibrate --clear')"
        )


class ServiceError(RagwrightError):
    """A call to a ragwright HTTP service (``ingest --server``) failed: ``status`` is the
    HTTP status (0 when the service could not be reached) and ``detail`` the problem
    details' own ``detail``."""

    def __init__(self, url: str, status: int, detail: str) -> None:
        self.url = url
        self.status = status
        self.detail = detail
        where = f"{url} answered {status}" if status else f"{url} cannot be reached"
        super().__init__(f"{where}: {detail}")


class JobError(RagwrightError):
    """A durable answer job operation was refused."""


class IdempotencyConflict(JobError):
    """The idempotency key was used (by this tenant) for a different input."""

    def __init__(self, idempotency_key: str, job_id: str) -> None:
        self.idempotency_key = idempotency_key
        self.job_id = job_id
        super().__init__(
            f"Idempotency-Key {idempotency_key!r} was used for a different request "
            f"(job {job_id}); use a new key for a new request"
        )


class JobNotFound(JobError):
    """No job has this id (or the caller may not see it)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id!r}")


class IngestItemFailed(RagwrightError):
    """A worker recorded a failure for a work item of a queued ingestion run
    (``ragwright ingest --queue``); the run stops, and running it again resumes."""

    def __init__(self, run_id: str, item: int, worker: str, detail: str) -> None:
        self.run_id = run_id
        self.item = item
        self.worker = worker
        self.detail = detail
        super().__init__(
            f"ingest run {run_id}: work item {item} failed on worker {worker}: {detail}; "
            "what was written stays consistent: run the ingestion again to finish it"
        )


class IngestRunExpired(RagwrightError):
    """A queued ingestion's deadline (``RAGWRIGHT_INGEST_DEADLINE``) passed with work
    items no worker recorded a result for; the run stops and its queued items are
    dropped."""

    def __init__(self, run_id: str, outstanding: int, items: int) -> None:
        self.run_id = run_id
        self.outstanding = outstanding
        self.items = items
        super().__init__(
            f"ingest run {run_id}: {outstanding} of {items} work items had no result when "
            "the run's deadline (RAGWRIGHT_INGEST_DEADLINE) passed; is an `ragwright "
            "ingest-worker` taking items from this queue? what was written stays "
            "consistent: run the ingestion again to finish it"
        )

"""Frozen records shared by every layer.

Core records are frozen, slotted dataclasses; pydantic lives only at the boundaries
(settings, provider JSON, source files). Sequences are tuples so records stay hashable
and cannot be changed behind a caller's back.

:class:`TokenCounter` is the one protocol defined here rather than in ``protocols.py``:
the pure core counts tokens while assembling context, and the core may import only this
module and ``errors`` (``protocols.py`` re-exports it with the other protocols).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

PUBLICATION_STATES: tuple[str, ...] = ("published", "draft")
# What an API key may do (``ragwright.application.keys.SCOPES``); defined here so the
# command line can name them in its help without importing the application.
API_KEY_SCOPES: tuple[str, ...] = ("answer", "search", "ingest", "admin")
DEFAULT_DOCUMENT_TYPES: tuple[str, ...] = ("runbook", "note")
# What a document whose file, folder rules and command line give no type or state gets:
# the type and state the default eligibility searches, so a newcomer's first ``ask``
# finds what a bare ``ingest`` wrote (docs/ingestion.md, "Metadata").
UNLABELLED_TYPE = "runbook"
UNLABELLED_STATE = "published"
Distance = Literal["cosine", "dot", "euclid"]


@dataclass(frozen=True, slots=True)
class SourceSection:
    """A section of a source document: a stable id, a heading and ordered paragraphs.

    ``pages`` (paged formats such as PDF) holds the 1-based page of each paragraph, in
    order; ``None`` for formats without pages.
    """

    section_id: str
    heading: str
    paragraphs: tuple[str, ...]
    pages: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A validated source document (see ``core.documents.validate_document``).

    ``revision`` identifies the content; when the source gives none it is the content
    hash computed by ``core.documents.content_revision``.
    """

    document_id: str
    title: str
    document_type: str
    publication_state: str
    sections: tuple[SourceSection, ...]
    revision: str
    source_uri: str = ""
    tenant: str | None = None
    # ``content_revision`` of the title and sections, kept by ``validate_document`` so a
    # run hashes each document's content once (a re-run of 100,000 unchanged documents
    # hashed it twice: 3.6 s of 38.5 s profiled). Not an init field: ``replace`` and
    # direct construction leave it empty, and readers then compute it.
    content_hash: str = field(default="", init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ParagraphPositions:
    """Where a chunk's paragraphs sit in the source: section index and paragraph indexes.

    Later stages use this to tell true overlap (same position) from repeated text.
    """

    section_index: int
    paragraph_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChunkingPolicy:
    """An inspectable chunking policy; its ``version`` names every rule that shapes text.

    ``kind`` is ``section-paragraphs`` (the seed policy; a paragraph the seeds refused as
    oversize is split at sentence boundaries, its chunks marked ``split``) or
    ``sentence-blocks`` (splits oversize blocks at sentence or line boundaries first).
    ``max_tokens`` sets a ceiling below the embedding profile's input limit (which always
    applies) on the model tokens of the complete embedding input (formatted by the
    profile); it needs a token counter when chunks are built.
    """

    kind: Literal["section-paragraphs", "sentence-blocks"] = "section-paragraphs"
    max_words: int = 80
    overlap: bool = True
    revision: int = 1
    max_tokens: int | None = None

    @property
    def version(self) -> str:
        """E.g. ``section-paragraphs-80w-overlap1-v1``; with tokens ``...-80w-256t-overlap1-v1``."""
        tokens = f"-{self.max_tokens}t" if self.max_tokens is not None else ""
        return f"{self.kind}-{self.max_words}w{tokens}-overlap{int(self.overlap)}-v{self.revision}"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One window of complete paragraphs from one section.

    ``point_id`` is the chunk identity of the seeds: SHA-256 of
    ``"{version}\\n{document_id}\\n{chunk_id}"``, first 16 bytes as a big-endian UUID.
    ``text`` is the heading, a blank line, then the paragraphs joined by blank lines.
    """

    document_id: str
    chunk_id: str
    point_id: uuid.UUID
    chunking_version: str
    section_id: str
    heading: str
    text: str
    positions: ParagraphPositions
    word_count: int
    pages: tuple[int, int] | None = None
    # Holds a piece of a paragraph that was split to fit the word budget or token ceiling.
    split: bool = False


@dataclass(frozen=True, slots=True)
class EmbeddingProfile:
    """Everything that decides which vector a text gets. A change is a new ``profile_id``.

    ``document_format`` may use ``{title}`` and ``{text}``; ``query_format`` uses
    ``{query}``. ``artifact_digest`` pins the exact model files (``sha256:...``) or the
    provider's model digest; ``max_input_tokens`` is enforced before embedding.

    ``default_answerability_threshold`` is the answerability threshold (the best
    question-sentence cosine similarity, :mod:`ragwright.pipeline.answerability`) that
    applies while nothing is calibrated: measured for this model on public labelled
    questions (``benchmarks/default_answerability.py``), never calibrated on the team's
    own; ``None`` when none was measured for the model (nothing is declined before a
    calibration). Similarities are on the model's own scale, so it belongs to the profile.
    It is not part of the vectors' identity (``profile_id`` does not change with it).
    """

    profile_id: str
    provider: str
    model: str
    artifact_digest: str
    dimensions: int
    distance: Distance
    document_format: str
    query_format: str
    max_input_tokens: int
    default_answerability_threshold: float | None = None


@dataclass(frozen=True, slots=True)
class LexicalStats:
    """A collection's BM25 corpus statistics (``core.lexical``): the points counted, their
    analysed terms, and the ``avgdl`` every stored sparse vector was encoded with (within
    a small tolerance of ``terms / chunks``)."""

    chunks: int
    terms: int
    avgdl: float


@dataclass(frozen=True, slots=True)
class CollectionContract:
    """What a collection promises about its vectors; checked on every open.

    ``lexical_stats`` is state, not a promise to check: ingestion updates it (None until
    the first ingestion), and opening never compares it.
    """

    vector_name: str
    dimensions: int
    distance: Distance
    profile_id: str
    profile_digest: str
    chunking_versions: tuple[str, ...]
    sparse_vector_name: str = "bm25"
    lexical_profile_id: str = ""
    lexical_stats: LexicalStats | None = None


@dataclass(frozen=True, slots=True)
class FieldMatch:
    """Keyword equality on a payload field; several values mean any of them."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PointFilter:
    """All ``must`` hold, no ``must_not`` holds, and every ``empty`` field is absent."""

    must: tuple[FieldMatch, ...] = ()
    must_not: tuple[FieldMatch, ...] = ()
    empty: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SparseVector:
    """Sorted distinct indexes and their weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class IndexPoint:
    """A point to write: id, dense vector, BM25 sparse vector and the complete payload."""

    point_id: uuid.UUID
    vector: Sequence[float]
    payload: Mapping[str, Any]
    sparse: SparseVector | None = None


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """A point as read from the index; ``score`` is set by queries only."""

    point_id: uuid.UUID
    payload: Mapping[str, Any]
    score: float | None = None
    vector: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class SkippedDocument:
    """A benchmark-format document left out of a load: its id, where it is, and the
    rule it breaks."""

    document_id: str
    source: str
    field: str
    reason: str


@dataclass(frozen=True, slots=True)
class DocumentOrigin:
    """Where a loaded document's metadata came from, field by field.

    Each ``*_from`` names the origin as a user can act on it: ``front matter``,
    ``rule 'notes/*' in ragwright-sources.toml``, ``--type``, ``path``, ``first heading``,
    ``PDF metadata``, ``<title>``, ``file name``; ``none`` for a tenant nobody gave.
    """

    document_id: str
    source: str
    title: str
    document_type: str
    publication_state: str
    tenant: str | None
    id_from: str
    title_from: str
    type_from: str
    state_from: str
    tenant_from: str


@dataclass(frozen=True, slots=True)
class SharedDocumentId:
    """A document a run wrote whose id the index also holds under other tenants.

    A document's identity is (tenant, id): the other tenants' documents were left as they
    are. This is how a document whose tenant changed between runs shows up.
    """

    document_id: str
    tenant: str | None
    other_tenants: tuple[str | None, ...]


# A document's identity in the index: its tenant (None for untenanted) and its id.
DocumentKey = tuple[str | None, str]


def record_fields(record: Any) -> dict[str, Any]:
    """A dataclass record's fields by name, values as they are (``asdict`` would turn
    nested records into dicts): to build a record derived from another."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True, slots=True)
class SliceReport:
    """What the writing pass did to a slice of a run's changed documents, in counts of
    chunks unless named otherwise (JSON-able: a queued run's workers send theirs to the
    coordinator, which sums them with :meth:`total`).

    ``shared_ids`` lists written documents whose id the index also holds under other
    tenants; ``changed_documents`` the (tenant, document id) pairs whose indexed content
    was replaced.
    """

    chunks: int = 0
    embedded: int = 0
    payload_updated: int = 0
    deleted: int = 0
    verified: int = 0
    documents_changed: int = 0
    embedding_tokens: int = 0
    shared_ids: tuple[SharedDocumentId, ...] = ()
    changed_documents: tuple[DocumentKey, ...] = ()

    @classmethod
    def total(cls, reports: Iterable[SliceReport]) -> SliceReport:
        """The sum of ``reports``: counts added, lists joined in order."""
        reports = list(reports)
        return SliceReport(
            **{
                f.name: sum(getattr(r, f.name) for r in reports)
                for f in fields(SliceReport)
                if f.type == "int"
            },
            shared_ids=tuple(s for r in reports for s in r.shared_ids),
            changed_documents=tuple(k for r in reports for k in r.changed_documents),
        )

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(SliceReport) if f.type == "int"}
        out["shared_ids"] = [
            [s.document_id, s.tenant, list(s.other_tenants)] for s in self.shared_ids
        ]
        out["changed_documents"] = [list(key) for key in self.changed_documents]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SliceReport:
        return SliceReport(
            **{f.name: int(data[f.name]) for f in fields(SliceReport) if f.type == "int"},
            shared_ids=tuple(
                SharedDocumentId(str(document_id), tenant, tuple(others))
                for document_id, tenant, others in data["shared_ids"]
            ),
            changed_documents=tuple(
                (tenant, str(doc)) for tenant, doc in data["changed_documents"]
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestReport(SliceReport):
    """What one ingestion run did: its slices' :class:`SliceReport` summed (``chunks``
    and ``deleted`` also count the run's unchanged and pruned chunks) and the run's own
    counts.

    ``bm25_avgdl`` is the average length the collection's sparse vectors now carry;
    ``sparse_reencoded`` counts the points whose sparse vector was rebuilt because the
    corpus average drifted beyond the tolerance (docs/ingestion.md). ``tenants`` is the
    run's scope (``None`` for untenanted documents): the only tenants whose documents it
    could change or prune. ``left_out``: documents the run could not write (a problem of
    their own, left out with ``skip_invalid``); ``split_documents``: changed documents
    with a paragraph split at sentences to fit, the first ``split_sources`` named.
    ``changed_documents`` lists the (tenant, document id) pairs
    whose indexed content the run replaced or deleted, when the run was not given an
    ``on_changed`` callback (the application's runs are: they purge previous drafts
    citing them slice by slice, and leave this empty so no run holds the whole list).
    """

    documents: int
    unchanged: int
    documents_pruned: int = 0
    bm25_avgdl: float | None = None
    sparse_reencoded: int = 0
    tenants: tuple[str | None, ...] = ()
    left_out: tuple[SkippedDocument, ...] = ()
    split_documents: int = 0
    split_sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IndexState:
    """What a process knows of its index without failing: for readiness and status.

    ``held`` says the process holds one open index for every request (the service's
    held mode, embedded backend); ``opened`` that it is open now, ``points`` its exact
    count then. ``committed_points`` is the count the last commit recorded (``None``
    while an ingestion writes, or on a server). ``writing`` says an ingestion of this
    process is running. ``reason`` is one line saying why the index is not readable,
    else ``None``; ``error`` names the error's class so a caller can branch without
    reading text (``IndexNotFound``: nothing ingested yet; ``IndexDamaged``,
    ``IndexBusy``, ``ContractMismatch``, ``IndexUnavailable``, ``StorageError``, ...).
    """

    backend: str
    location: str
    held: bool
    opened: bool
    points: int | None = None
    committed_points: int | None = None
    writing: bool = False
    reason: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "location": self.location,
            "held": self.held,
            "opened": self.opened,
            "points": self.points,
            "committed_points": self.committed_points,
            "writing": self.writing,
            "reason": self.reason,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class RelevantKey:
    """A labelled relevant item: a chunk (``chunk_id`` set) or a whole document."""

    document_id: str
    grade: int
    chunk_id: str | None = None
    chunking_version: str | None = None


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One labelled question; ``unsupported`` questions have no relevant keys.

    ``reference_answers`` are human answers to score a generated answer against;
    ``reference_sentences`` holds, per reference, the evidence sentences it was written
    from (both empty when the dataset gives none).
    """

    case_id: str
    category: str
    question: str
    relevant: tuple[RelevantKey, ...] = ()
    unsupported: bool = False
    reference_answers: tuple[str, ...] = ()
    reference_sentences: tuple[tuple[str, ...], ...] = ()

    @property
    def level(self) -> Literal["chunk", "document"]:
        """Chunk-level when its labels name chunks, else document-level."""
        return "chunk" if self.relevant and self.relevant[0].chunk_id is not None else "document"


class TokenCounter(Protocol):
    """Counts the tokens of one encoding (o200k_base for prompts and budgets).

    The contract (checked by ``ragwright.testing.TokenCounterConformance``): the count of
    ``""`` is 0, a text with any non-space character counts at least 1, the same text
    always gives the same count, and text that spells a special token (``<|endoftext|>``)
    is counted as ordinary text, never rejected.
    """

    encoding_name: str

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...


# --- lexical profile ------------------------------------------------------------------
# Defined here (re-exported by ``core.lexical``) because ``protocols.SparseEncoder``
# names it and the protocols stand below the core.


@dataclass(frozen=True, slots=True)
class LexicalProfile:
    """BM25 parameters and analyser identity; its ``profile_id`` enters the contract."""

    k1: float = 0.9
    b: float = 0.4
    analyzer: str = "en-snowball-stop"
    # 2: avgdl left the profile for the collection's recorded statistics.
    revision: int = 2

    @property
    def profile_id(self) -> str:
        """E.g. ``bm25-en-snowball-stop-k0.9-b0.4-v2``."""
        return f"bm25-{self.analyzer}-k{self.k1:g}-b{self.b:g}-v{self.revision}"


# --- chat records ---------------------------------------------------------------------
# The chat-model contract's records (re-exported by ``chat.contract``): the
# ``ChatModel`` protocol in ``protocols.py`` names them, so they stand below it.

SchemaStyle = Literal["object", "variants"]
"""The answer schema's shape (re-exported by ``core.answers``)."""

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Generation options; ``json_schema`` requests schema-constrained output."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    json_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What a request must be prepared for on one provider of a failover.

    ``name`` is the provider's ``ChatModel.name`` (unique within a pipeline); ``system``
    the provider kind (``openai``, ``ollama``…); ``model`` the configured model.
    ``context_window`` and ``output_limit`` size the request, ``schema_style`` picks the
    answer schema, and ``token_ratio`` is how many of this model's tokens one token of the
    application's counter makes (above 1 for a finer tokenizer, so assembly leaves room).
    """

    name: str
    system: str
    model: str
    context_window: int = 4096
    output_limit: int = 512
    schema_style: SchemaStyle = "variants"
    token_ratio: float = 1.0


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Messages and options of one logical operation.

    ``scope`` names the tenant/data scope the messages were built from (trusted context);
    a request without one is never served from or stored in a shared response cache.
    ``prompt_version`` identifies the instructions, so a prompt change is a cache miss.

    Two hooks travel with the request and are no part of its identity (the cache key
    ignores them): ``prepare`` rebuilds the request for an alternate's
    :class:`ModelProfile` when failover switches (``None`` from it: the request cannot
    fit that model, which is then skipped), and ``accept`` is the caller's acceptance
    check — a response it refuses is returned but never cached.
    """

    messages: tuple[ChatMessage, ...]
    options: ChatOptions = ChatOptions()
    scope: str | None = None
    prompt_version: str | None = None
    prepare: Callable[[ModelProfile], ChatRequest | None] | None = field(
        default=None, compare=False, repr=False
    )
    accept: Callable[[ChatResponse], bool] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it.

    The optional fields are what some providers add, ``None`` when not reported:
    ``cached_input_tokens``, the input tokens the provider reused from its prompt cache
    instead of reading them again (OpenAI's ``cached_tokens``, llama.cpp's ``cache_n``);
    ``input_ms`` and ``output_ms``, the provider's own time reading the input and writing
    the output (llama.cpp's ``prompt_ms``/``predicted_ms``, Ollama's eval durations), so
    an answer's generation time splits into prompt processing and decoding.
    """

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None
    input_ms: float | None = None
    output_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A complete response; ``model`` is the identity the provider reported.

    ``provider`` names the adapter that answered and ``fallback`` says whether it was an
    alternate, so callers and telemetry can see which promise was kept.
    """

    text: str
    finish_reason: str
    model: str
    usage: Usage | None = None
    provider: str = ""
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class ChatUpdate:
    """One piece of a streamed response."""

    text: str

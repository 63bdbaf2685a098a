"""Requests and results of the corpus's use cases: chunks (a preview), ingest, status
and verify."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ragwright.application.grants import WriteGrant
from ragwright.application.requests.evidence import CalibrationStamp
from ragwright.errors import RequestError
from ragwright.types import (
    DocumentOrigin,
    IngestReport,
    SkippedDocument,
    SourceDocument,
    record_fields,
)

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
    # A piece of a paragraph split at sentence boundaries to fit the budget or ceiling.
    split: bool = False


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
        out["split_sources"] = list(self.split_sources)
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
    "split_documents",
    "split_sources",
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


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

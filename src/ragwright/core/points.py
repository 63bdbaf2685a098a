"""What a chunk looks like inside the index: stored ids, payload, digests, validation.

Two identities, on purpose (see docs/ingestion.md):

* ``chunk_point_id`` is the seeds' chunk identity (version, document, chunk id), with
  the tenant added for tenanted documents (``core.chunking``). It is what
  ``chunks --json`` shows and what citations resolve to.
* the **stored** point id is derived from it and the content hash of the exact embedding
  input: ``uuid(sha256(f"{chunk_point_id}\\n{content_hash}")[:16])``. An edited chunk
  therefore gets a new point that can be written *staged* (invisible) next to the old one,
  and the switch to the new revision never shows a mix of old and new text. An unchanged
  chunk keeps its stored id, so it is neither re-embedded nor rewritten.

Two per-document digests ride on every point of a document:

* ``source_digest`` hashes what the chunks are *made from* (content, metadata, chunking
  version, embedding and BM25 profiles). When all live points of a document carry the
  current source digest and their number equals the stored ``chunk_count``, the document
  is unchanged and is not even chunked again: an unchanged re-run costs a hash per
  document and a few counts per slice of them (``change_key``, below).
* ``change_key`` (keyword-indexed) hashes the tenant, document id, source digest and
  chunk count together (:func:`change_key`). Counting points by it, from the payload
  index alone, proves a document unchanged without reading a payload
  (:mod:`ragwright.pipeline.unchanged`).
* ``document_digest`` hashes everything the index should hold for the document (stored
  ids and payloads); the switch and the verification check it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragwright.core.documents import document_content_hash
from ragwright.errors import PayloadError
from ragwright.types import Chunk, EmbeddingProfile, ParagraphPositions, SourceDocument

LIVE = "live"
STAGED = "staged"
# Payload field: see :func:`change_key`.
CHANGE_KEY = "change_key"

KEYWORD_INDEX_FIELDS: tuple[str, ...] = (
    "document_id",
    "chunking_version",
    "document_type",
    "publication_state",
    "tenant",
    "index_state",
    CHANGE_KEY,
)
# Analysed terms of the point's BM25 text, written with its sparse vector: the collection's
# avgdl is the mean of these over all points.
LEXICAL_TERMS = "lexical_terms"
# Integer payload indexes: the BM25 statistics are a facet over the term counts.
INTEGER_INDEX_FIELDS: tuple[str, ...] = (LEXICAL_TERMS,)
REQUIRED_STRING_FIELDS: tuple[str, ...] = (
    "document_id",
    "chunk_id",
    "chunk_point_id",
    "chunking_version",
    "section_id",
    "title",
    "heading",
    "text",
    "document_type",
    "publication_state",
    "revision",
    "content_hash",
    "index_state",
    "document_digest",
)
# A BEIR document without a title keeps it missing: empty title and heading, not blank-checked.
MAY_BE_EMPTY_FIELDS = frozenset({"title", "heading"})
OPTIONAL_STRING_FIELDS: tuple[str, ...] = ("tenant", "source_uri")
# Fields that are the same on every point of a document; switching a document to a new
# revision sets them on all its points in one operation.
DOCUMENT_FIELDS: tuple[str, ...] = (
    "title",
    "document_type",
    "publication_state",
    "revision",
    "source_uri",
    "tenant",
    "document_digest",
    "source_digest",
    "chunk_count",
    CHANGE_KEY,
    "index_state",
)
# Bump when code changes how plans are derived from sources in a way no version or
# profile id captures, so every document is planned again. 2: tenants are part of the
# chunk identity, so tenanted documents indexed before get their own point ids.
PLAN_REVISION = 2


@dataclass(frozen=True, slots=True)
class PlannedPoint:
    """One chunk as it should be stored: stored id, embedding input and final payload."""

    stored_id: uuid.UUID
    chunk: Chunk
    embedding_input: str
    lexical_text: str
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DocumentPlan:
    """Everything the index should hold for one document under one chunking version."""

    document: SourceDocument
    points: tuple[PlannedPoint, ...]
    digest: str

    @property
    def document_fields(self) -> dict[str, Any]:
        """The document-level payload, as set on every point at the switch."""
        first = self.points[0].payload
        return {key: first[key] for key in DOCUMENT_FIELDS if key in first}


@dataclass(frozen=True, slots=True)
class ChunkPayload:
    """A stored payload that passed validation."""

    point_id: uuid.UUID
    document_id: str
    chunk_id: str
    chunk_point_id: str
    chunking_version: str
    section_id: str
    title: str
    heading: str
    text: str
    document_type: str
    publication_state: str
    revision: str
    content_hash: str
    index_state: str
    document_digest: str
    positions: ParagraphPositions
    tenant: str | None
    source_uri: str | None
    pages: tuple[int, int] | None = None


def format_document_input(profile: EmbeddingProfile, title: str, text: str) -> str:
    """The exact string the embedding model receives for a chunk."""
    return profile.document_format.format(title=title, text=text)


def chunk_body(title: str, heading: str, text: str) -> str:
    """The chunk text for the embedding and BM25 inputs.

    A chunk's text opens with its section heading. When that heading *is* the document
    title (a BEIR abstract, an intro section), the formats below already lead with the
    title, so the heading is dropped here instead of feeding the title twice.
    """
    prefix = heading + "\n\n"
    return text[len(prefix) :] if heading == title and text.startswith(prefix) else text


def lexical_text(title: str, heading: str, text: str) -> str:
    """What BM25 indexes for a chunk: the document title (when it has one), then the body."""
    body = chunk_body(title, heading, text)
    return f"{title}\n\n{body}" if title else body


def format_query_input(profile: EmbeddingProfile, query: str) -> str:
    """The exact string the embedding model receives for a question."""
    return profile.query_format.format(query=query)


def sha256_text(text: str) -> str:
    """``sha256:`` + hex digest of the UTF-8 text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored_point_id(chunk_point_id: uuid.UUID, content_hash: str) -> uuid.UUID:
    """Revision-specific id derived from the chunk identity and its content hash."""
    digest = hashlib.sha256(f"{chunk_point_id}\n{content_hash}".encode()).digest()
    return uuid.UUID(bytes=digest[:16])


def change_key(tenant: str | None, document_id: str, source: str, chunk_count: int) -> str:
    """The value every point of a document written from one plan carries in ``change_key``:
    a hash of the document's key, its source digest and its chunk count. At most
    ``chunk_count`` points carry it (one per chunk), so an exact count of the live points
    carrying it equal to ``chunk_count`` says the document is stored whole under that
    source, with no payload read."""
    canonical = json.dumps([tenant, document_id, source, chunk_count], ensure_ascii=False)
    return sha256_text(canonical)[:32]


def source_digest(
    document: SourceDocument,
    *,
    chunking_version: str,
    profile: EmbeddingProfile,
    lexical_profile_id: str,
) -> str:
    """Hash of everything a document's chunks and vectors are derived from."""
    canonical = json.dumps(
        {
            "plan_revision": PLAN_REVISION,
            "content": document_content_hash(document),
            "revision": document.revision,
            "title": document.title,
            "document_type": document.document_type,
            "publication_state": document.publication_state,
            "tenant": document.tenant,
            "source_uri": document.source_uri,
            "chunking_version": chunking_version,
            "embedding": [
                profile.profile_id,
                profile.artifact_digest,
                profile.document_format,
                profile.max_input_tokens,
            ],
            "lexical_profile": lexical_profile_id,
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return sha256_text(canonical)


def chunk_inputs(
    document: SourceDocument, chunk: Chunk, profile: EmbeddingProfile
) -> tuple[str, str]:
    """A chunk's embedding input and BM25 text: the two strings its vectors derive from."""
    embedding_input = format_document_input(
        profile, document.title, chunk_body(document.title, chunk.heading, chunk.text)
    )
    return embedding_input, lexical_text(document.title, chunk.heading, chunk.text)


def plan_document(
    document: SourceDocument,
    chunks: Sequence[Chunk],
    profile: EmbeddingProfile,
    *,
    source: str = "",
) -> DocumentPlan:
    """Compute stored ids, embedding inputs, payloads and the document digest."""
    planned: list[tuple[uuid.UUID, Chunk, str, str, dict[str, Any]]] = []
    key = change_key(document.tenant, document.document_id, source, len(chunks))
    for chunk in chunks:
        embedding_input, lexical = chunk_inputs(document, chunk, profile)
        # Both vectors derive from these two strings; either changing makes a new point.
        content_hash = sha256_text(embedding_input + "\x00" + lexical)
        payload: dict[str, Any] = {
            "document_id": document.document_id,
            "chunk_id": chunk.chunk_id,
            "chunk_point_id": str(chunk.point_id),
            "chunking_version": chunk.chunking_version,
            "section_id": chunk.section_id,
            "title": document.title,
            "heading": chunk.heading,
            "text": chunk.text,
            "document_type": document.document_type,
            "publication_state": document.publication_state,
            "revision": document.revision,
            "content_hash": content_hash,
            "source_digest": source,
            "chunk_count": len(chunks),
            CHANGE_KEY: key,
            "positions": {
                "section_index": chunk.positions.section_index,
                "paragraphs": list(chunk.positions.paragraph_indexes),
            },
        }
        if chunk.pages is not None:
            # Only paged documents carry it: every other payload is as before.
            payload["pages"] = list(chunk.pages)
        if document.source_uri:
            payload["source_uri"] = document.source_uri
        if document.tenant is not None:
            payload["tenant"] = document.tenant
        planned.append(
            (
                stored_point_id(chunk.point_id, content_hash),
                chunk,
                embedding_input,
                lexical,
                payload,
            )
        )
    canonical = json.dumps(
        sorted((str(stored), payload) for stored, _, _, _, payload in planned),
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = sha256_text(canonical)
    points = tuple(
        PlannedPoint(
            stored,
            chunk,
            embedding_input,
            lexical,
            {**payload, "document_digest": digest, "index_state": LIVE},
        )
        for stored, chunk, embedding_input, lexical, payload in planned
    )
    return DocumentPlan(document=document, points=points, digest=digest)


def read_payload(point_id: uuid.UUID, payload: Mapping[str, Any] | None) -> ChunkPayload:
    """Validate a stored payload, failing closed.

    Raises:
        PayloadError: a required field is missing, not a scalar string, or blank; an
            optional field is present but not a non-blank string; positions are malformed.
    """
    pid = str(point_id)
    if payload is None:
        raise PayloadError(pid, "*", "is missing: the point has no payload")
    values: dict[str, str] = {}
    for field in REQUIRED_STRING_FIELDS:
        if field not in payload:
            raise PayloadError(pid, field, "is missing")
        values[field] = _scalar_string(
            pid, field, payload[field], may_be_empty=field in MAY_BE_EMPTY_FIELDS
        )
    optional: dict[str, str | None] = {}
    for field in OPTIONAL_STRING_FIELDS:
        optional[field] = _scalar_string(pid, field, payload[field]) if field in payload else None
    return ChunkPayload(
        point_id=point_id,
        positions=_positions(pid, payload.get("positions")),
        tenant=optional["tenant"],
        source_uri=optional["source_uri"],
        pages=_pages(pid, payload["pages"]) if "pages" in payload else None,
        **values,
    )


def _pages(pid: str, value: object) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in value)
        or value[0] > value[1]
    ):
        raise PayloadError(pid, "pages", "must be [first, last] page numbers, 1 <= first <= last")
    return (value[0], value[1])


def _scalar_string(pid: str, field: str, value: object, *, may_be_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise PayloadError(pid, field, f"must be a scalar string, found {type(value).__name__}")
    if not value.strip() and not (may_be_empty and value == ""):
        raise PayloadError(pid, field, "must not be blank")
    return value


def _positions(pid: str, value: object) -> ParagraphPositions:
    if not isinstance(value, Mapping):
        raise PayloadError(pid, "positions", "must be an object with section_index and paragraphs")
    section_index = value.get("section_index")
    paragraphs = value.get("paragraphs")
    if not isinstance(section_index, int) or isinstance(section_index, bool) or section_index < 0:
        raise PayloadError(pid, "positions.section_index", "must be a non-negative integer")
    if (
        not isinstance(paragraphs, list)
        or not paragraphs
        or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in paragraphs)
    ):
        raise PayloadError(pid, "positions.paragraphs", "must be a non-empty list of indexes")
    return ParagraphPositions(section_index, tuple(paragraphs))

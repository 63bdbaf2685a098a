"""The seeds' JSON (``.json``) and BEIR ``corpus.jsonl``: documents already in shape.

JSON (``.json``): one document, a list of documents, or ``{"documents": [...]}``, in the
seeds' shape (``document_id``, ``title``, ``document_type``, ``publication_state``,
``sections: [{section_id, heading, paragraphs}]``; camelCase accepted).

BEIR (``corpus.jsonl``): one document per line (``_id``, ``title``, ``text``); the text
becomes one section headed by the title, split into paragraphs on blank lines. A blank
title stays missing: the document's title and its section heading are empty, so its
chunks hold only the text (nothing invented is embedded or BM25-indexed). Benchmark
corpora contain documents no rule would accept (an empty text); with ``on_invalid``
such a document is reported and left out instead of failing the load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ragwright.adapters.source_metadata import SourceDefaults
from ragwright.core.documents import validate_document
from ragwright.errors import DocumentError, SourceError, UnreadableKind, UnreadableSource
from ragwright.types import SkippedDocument, SourceDocument, SourceSection

_DEFAULTED_FIELDS = frozenset({"document_type", "publication_state", "tenant"})


class _JsonSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    section_id: str = Field(validation_alias=AliasChoices("section_id", "sectionId"))
    heading: str
    paragraphs: list[str]


class _JsonDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document_id: str = Field(validation_alias=AliasChoices("document_id", "documentId"))
    title: str
    document_type: str | None = Field(
        None, validation_alias=AliasChoices("document_type", "documentType")
    )
    publication_state: str | None = Field(
        None, validation_alias=AliasChoices("publication_state", "publicationState")
    )
    tenant: str | None = None
    revision: str | None = None
    source_uri: str | None = Field(None, validation_alias=AliasChoices("source_uri", "sourceUri"))
    sections: list[_JsonSection]


def load_json(path: Path, defaults: SourceDefaults) -> list[SourceDocument]:
    """Documents from one JSON file in the seeds' shape."""
    try:
        data = json.loads(path.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SourceError(str(path), f"not readable JSON: {error}") from error
    if isinstance(data, Mapping) and "documents" in data:
        data = data["documents"]
    items = data if isinstance(data, list) else [data]
    if not any(isinstance(i, Mapping) and {"document_id", "sections"} & set(i) for i in items):
        # Another tool's JSON in a team's folder (a manifest, a config): not a document
        # file, so left out of a walked folder like a file of another type.
        raise UnreadableSource(
            str(path),
            UnreadableKind.NOT_DOCUMENTS,
            "JSON without ragwright's document shape (no record has document_id or "
            "sections); see docs/ingestion.md for the JSON document format",
        )
    documents = []
    for index, item in enumerate(items):
        try:
            parsed = _JsonDocument.model_validate(item)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SourceError(
                str(path), f"document {index}: field {where!r}: {first['msg']}"
            ) from error
        documents.append(
            validate_document(
                document_id=parsed.document_id,
                title=parsed.title,
                document_type=parsed.document_type or defaults.type_or_default,
                publication_state=parsed.publication_state or defaults.state_or_default,
                sections=[
                    SourceSection(s.section_id, s.heading, tuple(s.paragraphs))
                    for s in parsed.sections
                ],
                revision=parsed.revision,
                source_uri=parsed.source_uri or path.as_posix(),
                tenant=parsed.tenant if parsed.tenant is not None else defaults.tenant,
                document_types=defaults.document_types,
            )
        )
    return documents


def load_beir_corpus(
    path: Path,
    defaults: SourceDefaults,
    *,
    on_invalid: Callable[[SkippedDocument], None] | None = None,
) -> Iterator[SourceDocument]:
    """Documents from a BEIR ``corpus.jsonl`` (one JSON object per line).

    A line that is not a BEIR document is a :class:`SourceError` whatever ``on_invalid``
    says; a document that breaks a validation rule goes to ``on_invalid`` when given.
    """
    try:
        handle = path.open("r", encoding="utf-8-sig")
    except OSError as error:
        raise SourceError(str(path), f"cannot read: {error}") from error
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id = str(row["_id"])
                text = row["text"]
            except (ValueError, KeyError, TypeError) as error:
                raise SourceError(f"{path}:{number}", f"not a BEIR corpus line: {error}") from error
            title = str(row.get("title") or "").strip()
            paragraphs = tuple(p.strip() for p in re.split(r"\n\s*\n", str(text)) if p.strip())
            try:
                document = validate_document(
                    document_id=doc_id,
                    title=title,
                    document_type=defaults.type_or_default,
                    publication_state=defaults.state_or_default,
                    sections=[SourceSection("text", title, paragraphs)],
                    source_uri=f"{path.as_posix()}#{doc_id}",
                    tenant=defaults.tenant,
                    document_types=defaults.document_types,
                    allow_missing_title=True,
                )
            except DocumentError as error:
                # Metadata comes from the defaults, the same for every line: a mistake
                # there is the caller's, and skipping would silently drop the corpus.
                if on_invalid is None or error.field in _DEFAULTED_FIELDS:
                    raise
                on_invalid(SkippedDocument(doc_id, f"{path}:{number}", error.field, error.rule))
                continue
            yield document

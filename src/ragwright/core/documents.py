"""Source document validation and content revisions.

Validation happens once, at the boundary, and names the document and field it rejects:
blank ids and titles, unknown document types or publication states (exact spelling:
``Published`` is not ``published``), duplicate section ids, empty sections or
paragraphs, paragraphs over :data:`MAX_PARAGRAPH_CHARS` or documents over
:data:`MAX_DOCUMENT_CHARS` characters, control characters (newline, NUL, tab ...) in the
ids that make a chunk's identity (document id, tenant, section ids), and the same
document id twice for one tenant within one run. Benchmark corpora may lack titles
(``allow_missing_title``): the title is then empty, never invented.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence

from ragwright.core.chunking import has_control_character
from ragwright.core.keysets import KeySet
from ragwright.errors import DocumentError
from ragwright.types import (
    DEFAULT_DOCUMENT_TYPES,
    PUBLICATION_STATES,
    SourceDocument,
    SourceSection,
)

# Far above any real paragraph or document (the longest in the shared BEIR corpora is
# 23,147 characters), far below what would be stored as a multi-megabyte payload or
# embedded as a handful of unknown tokens.
MAX_PARAGRAPH_CHARS = 100_000
MAX_DOCUMENT_CHARS = 1_000_000


def content_revision(title: str, sections: Sequence[SourceSection]) -> str:
    """Hash of the content that shapes chunks: title, section ids, headings, paragraphs.

    Metadata (type, state, tenant, source) is deliberately outside it, so publishing a
    draft is a metadata change, not a new revision. A paged section's pages are part of
    it (citations show them); sections without pages hash as they always did.
    """
    canonical = json.dumps(
        [
            title,
            [
                [s.section_id, s.heading, list(s.paragraphs)]
                + ([] if s.pages is None else [list(s.pages)])
                for s in sections
            ],
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _require_text(document_id: str, field: str, value: object) -> str:
    if not isinstance(value, str):
        raise DocumentError(document_id, field, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise DocumentError(document_id, field, "must not be blank")
    return value


def _require_id(document_id: str, field: str, value: object) -> str:
    text = _require_text(document_id, field, value)
    if has_control_character(text):
        raise DocumentError(
            document_id,
            field,
            "must not contain control characters (newline, NUL, tab ...) or line separators",
        )
    return text


def validate_document(
    *,
    document_id: object,
    title: object,
    document_type: object,
    publication_state: object,
    sections: Sequence[SourceSection],
    revision: object = None,
    source_uri: str = "",
    tenant: object = None,
    document_types: Sequence[str] = DEFAULT_DOCUMENT_TYPES,
    allow_missing_title: bool = False,
) -> SourceDocument:
    """Build a :class:`SourceDocument`, rejecting anything the contract forbids.

    ``allow_missing_title`` (BEIR corpora only: authored sources always need a title)
    accepts a blank title as the empty string, and then a section heading that is empty
    too (a BEIR text's one section is headed by the title): its chunks carry no heading.

    Raises:
        DocumentError: naming the document, the field and the rule it breaks.
    """
    # The message quotes the id with repr, so a newline in it shows as \n.
    doc_id = _require_id(str(document_id or "<missing id>"), "document_id", document_id)
    if doc_id != doc_id.strip():
        raise DocumentError(doc_id, "document_id", "must not start or end with whitespace")
    if allow_missing_title and isinstance(title, str) and not title.strip():
        doc_title = ""
    else:
        doc_title = _require_text(doc_id, "title", title)
    doc_type = _require_text(doc_id, "document_type", document_type)
    if doc_type not in document_types:
        raise DocumentError(
            doc_id,
            "document_type",
            f"{doc_type!r} is not one of {list(document_types)} (exact spelling); a new "
            "type is added to the controlled list: RAGWRIGHT_DOCUMENT_TYPES="
            + "'"
            + json.dumps([*document_types, doc_type])
            + "' (or document_types in ragwright.toml)",
        )
    state = _require_text(doc_id, "publication_state", publication_state)
    if state not in PUBLICATION_STATES:
        raise DocumentError(
            doc_id,
            "publication_state",
            f"{state!r} is not one of {list(PUBLICATION_STATES)} (exact spelling)",
        )
    doc_tenant = None if tenant is None else _require_id(doc_id, "tenant", tenant)
    if not sections:
        raise DocumentError(doc_id, "sections", "a document needs at least one section")
    seen: set[str] = set()
    total_chars = len(doc_title)
    for index, section in enumerate(sections):
        where = f"sections[{index}]"
        section_id = _require_id(doc_id, f"{where}.section_id", section.section_id)
        if section_id in seen:
            raise DocumentError(
                doc_id, f"{where}.section_id", f"duplicate section id {section_id!r}"
            )
        seen.add(section_id)
        if not (doc_title == "" and section.heading == ""):
            _require_text(doc_id, f"{where}.heading", section.heading)
        if not section.paragraphs:
            raise DocumentError(
                doc_id, f"{where}.paragraphs", f"section {section_id!r} has no paragraphs"
            )
        for p_index, paragraph in enumerate(section.paragraphs):
            field = f"{where}.paragraphs[{p_index}]"
            _require_text(doc_id, field, paragraph)
            if len(paragraph) > MAX_PARAGRAPH_CHARS:
                raise DocumentError(
                    doc_id,
                    field,
                    f"has {len(paragraph):,} characters, at most {MAX_PARAGRAPH_CHARS:,} are "
                    "allowed: split it into paragraphs (blank lines)",
                )
            total_chars += len(section.heading) + len(paragraph)
        if section.pages is not None and (
            len(section.pages) != len(section.paragraphs)
            or not all(isinstance(p, int) and not isinstance(p, bool) for p in section.pages)
            or any(p < 1 for p in section.pages)
            or list(section.pages) != sorted(section.pages)
        ):
            raise DocumentError(
                doc_id,
                f"{where}.pages",
                "must hold one page number (1 or more, never decreasing) per paragraph",
            )
    if total_chars > MAX_DOCUMENT_CHARS:
        raise DocumentError(
            doc_id,
            "sections",
            f"the document has {total_chars:,} characters, at most {MAX_DOCUMENT_CHARS:,} are "
            "allowed: split it into several documents",
        )
    content_hash = content_revision(doc_title, sections)
    doc_revision = content_hash if revision is None else _require_text(doc_id, "revision", revision)
    document = SourceDocument(
        document_id=doc_id,
        title=doc_title,
        document_type=doc_type,
        publication_state=state,
        sections=tuple(sections),
        revision=doc_revision,
        source_uri=source_uri,
        tenant=doc_tenant,
    )
    object.__setattr__(document, "content_hash", content_hash)
    return document


def document_content_hash(document: SourceDocument) -> str:
    """:func:`content_revision` of ``document``, from what validation kept when it can."""
    return document.content_hash or content_revision(document.title, document.sections)


class SeenDocuments:
    """The (tenant, id) keys of the documents of one run so far, rejecting a repeat.

    A document's identity is its tenant and its id, so two tenants may each hold ``faq``.
    It keeps 16 bytes a document (:class:`~ragwright.core.keysets.KeySet`), the only state
    a streamed run's duplicate check needs. A repeat is rare, so the earlier source is
    not kept but found when one happens: ``earlier_source`` (the caller reads its
    sources again) gives the source URI of the first document with a key.
    """

    __slots__ = ("_earlier_source", "keys")

    def __init__(
        self, earlier_source: Callable[[tuple[str | None, str]], str | None] | None = None
    ) -> None:
        self.keys = KeySet()
        self._earlier_source = earlier_source

    def add(self, document: SourceDocument) -> None:
        """Record ``document``; raises :class:`DocumentError` if its key was seen."""
        if self.keys.add(document.tenant, document.document_id):
            return
        key = (document.tenant, document.document_id)
        earlier = self._earlier_source(key) if self._earlier_source is not None else None
        owner = "untenanted" if document.tenant is None else f"tenant {document.tenant!r}"
        raise DocumentError(
            document.document_id,
            "document_id",
            f"duplicate document id for {owner} in this run "
            f"(also in {earlier or 'another source'})",
            source=document.source_uri or None,
        )


def ensure_unique_ids(documents: Iterable[SourceDocument]) -> list[SourceDocument]:
    """Return the documents as a list, rejecting a document id seen twice for one tenant
    (see :class:`SeenDocuments`)."""
    result: list[SourceDocument] = []

    def earlier_source(key: tuple[str | None, str]) -> str | None:
        return next((d.source_uri for d in result if (d.tenant, d.document_id) == key), None)

    seen = SeenDocuments(earlier_source)
    for document in documents:
        seen.add(document)
        result.append(document)
    return result

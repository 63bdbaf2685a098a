"""A cited passage, read back for the caller who was shown the citation.

The page's citation links open the chunk an answer cited: its text, document title,
section heading and revision. Reading it applies the caller's whole grant, as a search
does (tenant, allowlist, the key's document types and publication states, live points of
the queried chunking version): a chunk the key may not see is reported exactly like one
that does not exist, so a link cannot be used to probe another tenant's documents.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragwright.application.callers import evidence_for
from ragwright.application.keys import ApiKey
from ragwright.core.eligibility import CallerScope, eligibility_filter
from ragwright.core.points import read_payload
from ragwright.types import FieldMatch

if TYPE_CHECKING:
    from ragwright.application.facade import Application


@dataclass(frozen=True, slots=True)
class Passage:
    """One chunk as its reader may see it."""

    document_id: str
    chunk_id: str
    chunking_version: str
    title: str
    section: str
    revision: str
    text: str
    source_uri: str | None
    page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def read_passage(
    application: Application, key: ApiKey, document_id: str, chunk_id: str
) -> Passage | None:
    """The live chunk ``chunk_id`` of ``document_id`` that ``key``'s caller may see now,
    else ``None`` (absent and not eligible alike).

    Raises:
        VectorIndexError: the index cannot be read (``IndexNotFound`` before the first
            ingestion).
    """
    scope = CallerScope(tenant=key.tenant, allowed_documents=key.documents or None)
    eligibility = application.eligibility(evidence_for(key, ()))
    base = eligibility_filter(eligibility, scope)
    point_filter = dataclasses.replace(
        base, must=(*base.must, FieldMatch("document_id", (document_id,)))
    )
    index = application.components.open_index(eligibility.chunking_version, write=False)
    try:
        with index.reading():
            for point in index.scroll(point_filter):
                payload = read_payload(point.point_id, point.payload)
                if payload.chunk_id != chunk_id:
                    continue
                page = (point.payload or {}).get("page")
                return Passage(
                    document_id=payload.document_id,
                    chunk_id=payload.chunk_id,
                    chunking_version=payload.chunking_version,
                    title=payload.title,
                    section=payload.heading,
                    revision=payload.revision,
                    text=payload.text,
                    source_uri=payload.source_uri,
                    page=page if isinstance(page, int) else None,
                )
    finally:
        index.close()
    return None

"""What an API key may write: the grant that bounds an ingestion made on its behalf.

A key's grant limits writes as strictly as reads (docs/service.md, "Grants on writes"):
an ingestion through the service may write, change and prune only documents of the key's
tenant that are within its allowlist, its document types and its publication states.

- A document sent must be within the grant (its id, type and state).
- A document already stored under the same tenant and id must be within it too: writing
  over it would change a document the key may not touch (a draft-only key publishing
  over, or re-typing, a published runbook).
- ``prune`` considers only stored documents within the grant: the others are not the
  key's to delete, so they are left as they are (never counted as missing).

Empty ``documents`` means every id of the tenant; empty ``types`` every type the server
accepts (``RAGWRIGHT_DOCUMENT_TYPES``); empty ``states`` every publication state. Unlike
reads, where empty types and states mean the defaults (published runbooks), a key made
without ``--type``/``--state`` writes as before: an unrestricted ingest key may write
drafts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ragwright.application.keys import ApiKey
from ragwright.errors import RagwrightError
from ragwright.protocols import VectorIndex
from ragwright.types import FieldMatch, PointFilter, SourceDocument

# Stored documents read per filtered scan when checking what a write would replace.
IDS_PER_CHECK = 128


@dataclass(frozen=True, slots=True)
class WriteGrant:
    """The documents a key may write, change and prune within its tenant (empty: any)."""

    documents: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()

    def outside(self, document_id: str, document_type: str, publication_state: str) -> str | None:
        """The part of the grant a document breaks (``"document_id"``,
        ``"document_type"``, ``"publication_state"``), else ``None``."""
        if self.documents and document_id not in self.documents:
            return "document_id"
        if self.types and document_type not in self.types:
            return "document_type"
        if self.states and publication_state not in self.states:
            return "publication_state"
        return None

    def allowed(self, part: str) -> tuple[str, ...]:
        """What the grant allows for ``part`` (a name :meth:`outside` returns)."""
        return {
            "document_id": self.documents,
            "document_type": self.types,
            "publication_state": self.states,
        }[part]

    def prune_filter(self) -> tuple[FieldMatch, ...]:
        """Conditions a stored document must meet to be pruned on this grant's behalf."""
        matches = []
        for field, values in (
            ("document_id", self.documents),
            ("document_type", self.types),
            ("publication_state", self.states),
        ):
            if values:
                matches.append(FieldMatch(field, values))
        return tuple(matches)


def write_grant_for(key: ApiKey) -> WriteGrant:
    """The write grant of ``key``: its allowlist, document types and publication states."""
    return WriteGrant(documents=key.documents, types=key.types, states=key.states)


class OutsideGrant(RagwrightError):
    """A write would create, change or replace a document outside its key's grant.

    ``document_id`` names the document, ``part`` the field outside the grant
    (``document_id``, ``document_type`` or ``publication_state``), ``value`` its value,
    ``allowed`` what the grant allows, and ``stored`` whether it is the document
    already in the index (not the one sent) that is outside it.
    """

    def __init__(
        self,
        document_id: str,
        part: str,
        value: str,
        allowed: Sequence[str],
        *,
        stored: bool = False,
    ) -> None:
        self.document_id = document_id
        self.part = part
        self.value = value
        self.allowed = tuple(allowed)
        self.stored = stored
        whose = "the stored document" if stored else "the document"
        super().__init__(
            f"{whose} {document_id!r} has {part} {value!r}, outside this key's grant "
            f"(allowed: {', '.join(self.allowed)})"
        )


def check_documents(grant: WriteGrant, documents: Sequence[SourceDocument]) -> None:
    """Refuse the first document sent that is outside ``grant``.

    Raises:
        OutsideGrant: naming the document and the part of the grant it breaks.
    """
    for document in documents:
        part = grant.outside(
            document.document_id, document.document_type, document.publication_state
        )
        if part is not None:
            raise OutsideGrant(
                document.document_id, part, getattr(document, part), grant.allowed(part)
            )


def check_stored(
    index: VectorIndex,
    tenant: str | None,
    documents: Sequence[SourceDocument],
    grant: WriteGrant,
) -> None:
    """Refuse a write that would replace a stored document (same tenant and id, any
    chunking version) outside ``grant``: one filtered, payload-light scan per
    ``IDS_PER_CHECK`` documents, before anything is written.

    Raises:
        OutsideGrant: naming the stored document (``stored=True``).
    """
    if not grant.types and not grant.states:
        return  # the sent ids were checked against the allowlist: nothing else to break
    owner = (
        PointFilter(empty=("tenant",))
        if tenant is None
        else PointFilter(must=(FieldMatch("tenant", (tenant,)),))
    )
    for ids in _id_groups(sorted({d.document_id for d in documents})):
        points = index.scroll(
            PointFilter(
                must=(*owner.must, FieldMatch("document_id", tuple(ids))), empty=owner.empty
            ),
            payload_fields=("document_id", "document_type", "publication_state"),
        )
        for point in points:
            document_id = str(point.payload.get("document_id", ""))
            document_type = str(point.payload.get("document_type", ""))
            state = str(point.payload.get("publication_state", ""))
            part = grant.outside(document_id, document_type, state)
            if part is not None:
                value = {"document_type": document_type, "publication_state": state}.get(
                    part, document_id
                )
                raise OutsideGrant(document_id, part, value, grant.allowed(part), stored=True)


def _id_groups(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), IDS_PER_CHECK):
        yield ids[start : start + IDS_PER_CHECK]

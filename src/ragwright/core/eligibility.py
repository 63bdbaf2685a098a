"""Who may see what: eligibility conditions and the caller's scope, as one engine filter.

Eligibility is always part of the vector query, never a post-filter, so ``limit=k``
returns the k best *eligible* points. Required conditions are never relaxed: an empty
result is reported as "no eligible evidence".

* :class:`Eligibility` — what the application requires of evidence: the chunking
  version, document types, publication states, optionally specific documents.
* :class:`CallerScope` — what the caller is allowed to see, from trusted context (the
  authenticated principal, the operator's command line), never from the question.
  ``tenant=None`` sees only documents without a tenant; ``tenant="acme"`` sees only
  acme's documents. ``allowed_documents`` narrows further; an empty allowlist sees
  nothing.

Every returned payload is checked against the same conditions (:func:`check_payload`):
a point that should not have matched stops the request instead of leaking.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragwright.core.points import LIVE, ChunkPayload
from ragwright.errors import PayloadError
from ragwright.types import FieldMatch, PointFilter


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Required properties of evidence (defaults: published runbooks)."""

    chunking_version: str
    document_types: tuple[str, ...] = ("runbook",)
    publication_states: tuple[str, ...] = ("published",)
    document_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallerScope:
    """What the caller may see, from trusted context."""

    tenant: str | None = None
    allowed_documents: tuple[str, ...] | None = None

    @property
    def sees_nothing(self) -> bool:
        """An empty allowlist: no query is sent at all."""
        return self.allowed_documents is not None and not self.allowed_documents


def eligibility_filter(eligibility: Eligibility, scope: CallerScope) -> PointFilter:
    """The one filter every search leg sends to the engine."""
    if not eligibility.document_types or not eligibility.publication_states:
        raise ValueError("eligibility needs at least one document type and one publication state")
    must = [
        FieldMatch("index_state", (LIVE,)),
        FieldMatch("chunking_version", (eligibility.chunking_version,)),
        FieldMatch("document_type", eligibility.document_types),
        FieldMatch("publication_state", eligibility.publication_states),
    ]
    if eligibility.document_ids:
        must.append(FieldMatch("document_id", eligibility.document_ids))
    if scope.allowed_documents:
        must.append(FieldMatch("document_id", scope.allowed_documents))
    empty: tuple[str, ...] = ()
    if scope.tenant is None:
        empty = ("tenant",)
    else:
        must.append(FieldMatch("tenant", (scope.tenant,)))
    return PointFilter(must=tuple(must), empty=empty)


def check_payload(payload: ChunkPayload, eligibility: Eligibility, scope: CallerScope) -> None:
    """Raise :class:`PayloadError` unless the payload meets every condition asked."""
    pid = str(payload.point_id)
    checks = (
        ("index_state", payload.index_state == LIVE),
        ("chunking_version", payload.chunking_version == eligibility.chunking_version),
        ("document_type", payload.document_type in eligibility.document_types),
        ("publication_state", payload.publication_state in eligibility.publication_states),
        (
            "document_id",
            (not eligibility.document_ids or payload.document_id in eligibility.document_ids)
            and (scope.allowed_documents is None or payload.document_id in scope.allowed_documents),
        ),
        ("tenant", payload.tenant == scope.tenant),
    )
    for field, ok in checks:
        if not ok:
            raise PayloadError(pid, field, "does not meet the eligibility the query required")

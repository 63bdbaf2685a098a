"""Which chunking version a query reads, and what its conditions left out.

A query reads one chunking version. Unless its caller asked for one (a request's
``chunking_version``, the chunking settings), it reads the only version holding chunks
the caller may see, and when several do, the version the default chunking policy
produces (:meth:`ragwright.application.decisions.Decisions.evidence_scope` decides).

What the query's conditions left out is counted so a result can say so: live chunks that
meet every condition but the chunking version (``excluded_versions``), and, when the
request left types or states to the defaults (published runbooks), live chunks that meet
every condition but the document type (``excluded_types``) or the publication state
(``excluded_states``). Every count is taken within the caller's tenant, allowlist and
requested documents, and the type and state counts only within the types and states the
caller may also see (:attr:`EvidenceFilter.also_visible_types`): a count tells a caller
about stored chunks, never about chunks it could not read by asking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.core.points import LIVE
from ragwright.protocols import VectorIndex
from ragwright.types import FieldMatch, PointFilter

VersionSource = Literal["request", "settings", "index", "default"]
"""Why a query read its chunking version: the request named it (``request``), a chunking
setting was given (``settings``), it is the only one holding chunks the caller may see
(``index``), or the default chunking policy produces it (``default``: the index holds
none or several)."""


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Why the query read its chunking version, and the live chunks per chunking version,
    document type and publication state its conditions left out (only those the caller
    could read by asking for them)."""

    version_source: VersionSource = "default"
    versions: Mapping[str, int] = field(default_factory=dict)
    types: Mapping[str, int] = field(default_factory=dict)
    states: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunking_version_source": self.version_source,
            "excluded_versions": dict(self.versions),
            "excluded_types": dict(self.types),
            "excluded_states": dict(self.states),
        }


def held_versions(
    index: VectorIndex,
    scope: CallerScope,
    *,
    documents: tuple[str, ...],
    types: tuple[str, ...] | None,
    states: tuple[str, ...] | None,
) -> dict[str, int]:
    """Live chunks per chunking version among those the caller may see: its tenant and
    allowlist, the requested ``documents``, and ``types``/``states`` (``None``: any)."""
    if scope.sees_nothing or types == () or states == ():
        return {}
    must = [FieldMatch("index_state", (LIVE,))]
    for key, values in (
        ("document_id", documents),
        ("document_id", scope.allowed_documents or ()),
        ("document_type", types or ()),
        ("publication_state", states or ()),
    ):
        if values:
            must.append(FieldMatch(key, values))
    empty: tuple[str, ...] = ()
    if scope.tenant is None:
        empty = ("tenant",)
    else:
        must.append(FieldMatch("tenant", (scope.tenant,)))
    held = index.facet("chunking_version", PointFilter(must=tuple(must), empty=empty))
    return {str(version): count for version, count in held.items() if count}


def left_out_by(
    index: VectorIndex,
    eligibility: Eligibility,
    scope: CallerScope,
    key: str,
    visible: tuple[str, ...] | None = None,
) -> dict[str, int]:
    """Live chunks per value of ``key`` (``chunking_version``, ``document_type`` or
    ``publication_state``) that meet every condition of ``eligibility`` and ``scope`` but
    the one on ``key``: any other value, among ``visible`` (``None``: any)."""
    required = {
        "chunking_version": (eligibility.chunking_version,),
        "document_type": eligibility.document_types,
        "publication_state": eligibility.publication_states,
    }[key]
    if visible is not None:
        visible = tuple(v for v in visible if v not in required)
    if scope.sees_nothing or visible == ():
        return {}
    query = eligibility_filter(eligibility, scope)
    must = tuple(m for m in query.must if m.key != key)
    if visible is not None:
        must += (FieldMatch(key, visible),)
    counts = index.facet(
        key,
        PointFilter(
            must=must, must_not=(*query.must_not, FieldMatch(key, required)), empty=query.empty
        ),
    )
    return {str(value): count for value, count in sorted(counts.items()) if count}

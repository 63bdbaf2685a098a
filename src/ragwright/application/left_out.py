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

What a query searched is said whatever the index holds (:class:`Searched`): its document
types and publication states, where each came from (the defaults, the request, the
caller's API key), and what they leave out, in one sentence every entry point shows as
it is (the command line's notes, the HTTP answers, the page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragwright.application.requests.evidence import (
    DEFAULT_ELIGIBLE_STATES,
    DEFAULT_ELIGIBLE_TYPES,
    EvidenceFilter,
)
from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.core.points import LIVE
from ragwright.protocols import VectorIndex
from ragwright.types import PUBLICATION_STATES, FieldMatch, PointFilter

VersionSource = Literal["request", "settings", "index", "default"]
"""Why a query read its chunking version: the request named it (``request``), a chunking
setting was given (``settings``), it is the only one holding chunks the caller may see
(``index``), or the default chunking policy produces it (``default``: the index holds
none or several)."""


EligibilitySource = Literal["default", "request", "key"]
"""Where a query's document types or publication states came from: the defaults
(``default``: published runbooks, also for an API key made without types or states), the
request (``request``: the command line's ``--type``/``--state``, a request's
:class:`EvidenceFilter`), or the caller's API key's grant (``key``)."""

# How the sentence of Searched.note names each source: of one field, and of both at once.
_FIELD_SOURCE_WORDS: dict[EligibilitySource, str] = {
    "default": "by default",
    "request": "as asked",
    "key": "from this key's grant",
}
_BOTH_SOURCE_WORDS: dict[EligibilitySource, str] = {
    "default": "the default eligibility",
    "request": "as asked",
    "key": "this key's grant",
}


@dataclass(frozen=True, slots=True)
class Searched:
    """The document types and publication states a query searched and where each came
    from (:data:`EligibilitySource`)."""

    types: tuple[str, ...] = DEFAULT_ELIGIBLE_TYPES
    states: tuple[str, ...] = DEFAULT_ELIGIBLE_STATES
    types_source: EligibilitySource = "default"
    states_source: EligibilitySource = "default"

    @classmethod
    def of(cls, evidence: EvidenceFilter) -> Searched:
        """What a query under ``evidence`` searches (the defaults applied)."""
        named: EligibilitySource = "key" if evidence.granted else "request"
        return cls(
            types=evidence.effective_types,
            states=evidence.effective_states,
            types_source=named if evidence.types else "default",
            states_source=named if evidence.states else "default",
        )

    def note(self) -> str:
        """The sentence that says it: ``searched published runbook and note documents
        (types as asked, state by default); draft documents and documents of other types
        were not searched``. Other types are never named: a caller is not told which
        types exist beyond its own (the states are the fixed :data:`PUBLICATION_STATES`)."""
        if self.types_source == self.states_source:
            why = _BOTH_SOURCE_WORDS[self.types_source]
        else:
            why = (
                f"{_noun('type', self.types)} {_FIELD_SOURCE_WORDS[self.types_source]}, "
                f"{_noun('state', self.states)} {_FIELD_SOURCE_WORDS[self.states_source]}"
            )
        other_states = [s for s in PUBLICATION_STATES if s not in self.states]
        left = [f"{_and(other_states)} documents"] if other_states else []
        left.append("documents of other types")
        return (
            f"searched {_and(self.states)} {_and(self.types)} documents ({why}); "
            f"{' and '.join(left)} were not searched"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "types": list(self.types),
            "types_source": self.types_source,
            "states": list(self.states),
            "states_source": self.states_source,
            "note": self.note(),
        }


def _and(words: Sequence[str]) -> str:
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


def _noun(noun: str, values: Sequence[str]) -> str:
    return noun if len(values) == 1 else f"{noun}s"


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Why the query read its chunking version, which types and states it searched
    (:class:`Searched`), and the live chunks per chunking version, document type and
    publication state its conditions left out (only those the caller could read by
    asking for them)."""

    version_source: VersionSource = "default"
    versions: Mapping[str, int] = field(default_factory=dict)
    types: Mapping[str, int] = field(default_factory=dict)
    states: Mapping[str, int] = field(default_factory=dict)
    searched: Searched = field(default_factory=Searched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunking_version_source": self.version_source,
            "searched": self.searched.to_dict(),
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

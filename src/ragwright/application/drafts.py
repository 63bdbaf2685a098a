"""Previous drafts: an earlier answer shown, labelled with its age, while the model is down.

When the model cannot answer, a stored earlier answer to the same question may stand in
for it (the ``previous_draft`` mode, docs/service.md), but only when it was made from the
same inputs as the answer the request would get now. Its *input version* says which:
SHA-256 over the tenant, the assembly policy id, the instructions version and the
(document, revision) pairs it cited. The application recomputes it at lookup from the
cited documents' current revisions in the index, so an answer whose evidence changed, or
that this caller may no longer see, is never shown, even on a replica that missed the
purge that ingestion sends (:meth:`DraftStore.purge_documents`).

Drafts are stored per tenant: the tenant is part of every key and every lookup, so a
draft never crosses tenants. Standard library only (like :mod:`ragwright.application.keys`):
the answer path imports it.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

# Drafts read back per lookup, newest first: enough for the few input versions one
# question holds between purges, bounded so a lookup during an outage stays cheap.
FIND_LIMIT = 5


@dataclass(frozen=True, slots=True)
class Draft:
    """One stored answer.

    ``tenant`` is the asking caller's (``None``: untenanted documents); ``question_key``
    is :func:`question_key` of the question; ``input_version`` is :func:`input_version`
    of what the answer was made from; ``cited`` the (document id, revision) pairs its
    citations name, sorted; ``result`` the answer's JSON form as it was served (without
    the exact model request); ``created_at`` seconds since the epoch.
    """

    tenant: str | None
    question_key: str
    input_version: str
    cited: tuple[tuple[str, str], ...]
    result: Mapping[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class ShownDraft:
    """A draft chosen to stand in for an answer, and its age when chosen (seconds)."""

    draft: Draft
    age_seconds: float

    def label(self) -> dict[str, Any]:
        """What the answer's ``draft`` member says: when it was made, how old it is, and
        the input version it was made from (and still matches)."""
        made = datetime.fromtimestamp(self.draft.created_at, UTC)
        return {
            "created_at": made.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "age_seconds": round(self.age_seconds),
            "input_version": self.draft.input_version,
        }


class DraftStore(Protocol):
    """Where drafts live; safe to share between threads, processes and (PostgreSQL)
    replicas. A draft with the same tenant, question key and input version as a stored
    one replaces it."""

    def put(self, draft: Draft) -> None:
        """Store ``draft`` (replacing the one with the same key and input version)."""
        ...

    def find(
        self, tenant: str | None, question_key: str, *, limit: int = FIND_LIMIT
    ) -> list[Draft]:
        """This tenant's drafts for the question, newest first (at most ``limit``);
        never another tenant's."""
        ...

    def purge_documents(self, tenant: str | None, document_ids: Iterable[str]) -> int:
        """Delete this tenant's drafts citing any of ``document_ids``; how many."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


def normalise_question(question: str) -> str:
    """The question as drafts compare it: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", question).casefold().split())


def question_key(question: str) -> str:
    """SHA-256 (hex) of :func:`normalise_question`."""
    return hashlib.sha256(normalise_question(question).encode("utf-8")).hexdigest()


def input_version(
    *,
    tenant: str | None,
    assembly_policy: str | None,
    instructions_version: str | None,
    cited: Iterable[tuple[str, str]],
) -> str:
    """SHA-256 (hex) of the canonical JSON of what an answer was made from: tenant,
    assembly policy id, instructions version and the sorted, distinct (document id,
    revision) pairs it cited. Any change to one of them is another version."""
    text = json.dumps(
        {
            "tenant": tenant,
            "assembly_policy": assembly_policy,
            "instructions_version": instructions_version,
            "cited": sorted({(str(d), str(r)) for d, r in cited}),
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cited_revisions(citations: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The sorted, distinct (document id, revision) pairs of an answer's citations."""
    return tuple(sorted({(str(c["document_id"]), str(c["revision"])) for c in citations}))

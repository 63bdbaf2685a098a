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
draft never crosses tenants. :class:`DraftPolicy` decides when drafts are kept, shown
and purged. At import, the standard library, the core records and the errors only: the
answer path and the draft store adapters import it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.errors import StorageError
from ragwright.types import FieldMatch

if TYPE_CHECKING:
    from ragwright.application.requests.questions import AnswerRequest
    from ragwright.core.assembly import AssembledContext
    from ragwright.protocols import VectorIndex
    from ragwright.settings import Settings

logger = logging.getLogger(__name__)

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


class _AnswerBody(Protocol):
    """What a draft is kept from: an answer outcome's JSON form (``AnswerOutcome``, which
    imports this module for ``ShownDraft``; a protocol keeps the import graph a tree)."""

    def to_dict(self) -> dict[str, Any]: ...


class DraftPolicy:
    """When drafts are kept, shown and purged (``draft_max_age``; 0 turns them off)."""

    def __init__(
        self, settings: Settings, store: Callable[[], DraftStore], clock: Callable[[], float]
    ) -> None:
        self.settings = settings
        self._store = store
        self._clock = clock

    def applies(self, request: AnswerRequest) -> bool:
        """Drafts are kept and shown for plain questions only: with drafts turned off
        (``draft_max_age`` 0), a preview, or conversation history (the answer depended
        on the conversation, which the question key does not hold), none is."""
        return (
            self.settings.answers.draft_max_age > 0 and not request.preview and not request.history
        )

    def keep(self, request: AnswerRequest, outcome: _AnswerBody) -> None:
        """Store a generated answer as the draft for (tenant, question). A store that
        refuses costs the draft, never the answer: the refusal is logged."""
        body = outcome.to_dict()
        body.pop("request", None)  # the exact model request stays out of the store
        provenance = body["provenance"]
        cited = cited_revisions(body["citations"])
        if not cited:
            return  # nothing to check it against later
        draft = Draft(
            tenant=request.tenant,
            question_key=question_key(request.question),
            input_version=input_version(
                tenant=request.tenant,
                assembly_policy=provenance.get("assembly_policy"),
                instructions_version=provenance.get("instructions_version"),
                cited=cited,
            ),
            cited=cited,
            result=body,
            created_at=self._clock(),
        )
        try:
            self._store().put(draft)
        except StorageError as error:
            logger.warning("previous draft not stored: %s", error.reason)

    def find(
        self,
        request: AnswerRequest,
        index: VectorIndex,
        eligibility: Eligibility,
        context: AssembledContext,
        instructions: str,
    ) -> ShownDraft | None:
        """The newest draft of this tenant for the question whose input version matches
        now and that is younger than ``draft_max_age``; ``None`` otherwise.

        The input version is recomputed from the cited documents' current revisions as
        this caller may see them (tenant, allowlist, eligibility in force), this
        request's assembly policy and instructions version: a cited document that
        changed, is gone or is no longer eligible makes the draft not match, even on a
        replica that missed the purge."""
        try:
            drafts = self._store().find(request.tenant, question_key(request.question))
        except StorageError as error:
            logger.warning("previous drafts not read: %s", error.reason)
            return None
        now = self._clock()
        scope = CallerScope(tenant=request.tenant, allowed_documents=request.allowed_documents)
        for draft in drafts:
            age = now - draft.created_at
            if age > self.settings.answers.draft_max_age:
                break  # newest first: every later one is older still
            revisions = current_revisions(
                index, eligibility, scope, sorted({d for d, _ in draft.cited})
            )
            if revisions is None:
                continue
            current = input_version(
                tenant=request.tenant,
                assembly_policy=context.policy,
                instructions_version=instructions,
                cited=((d, revisions[d]) for d, _ in draft.cited),
            )
            if current == draft.input_version:
                return ShownDraft(draft, max(age, 0.0))
        return None

    def purge(self, changed: Sequence[tuple[str | None, str]]) -> None:
        """Delete drafts citing documents an ingestion changed or deleted, per tenant.
        Best effort: a draft left behind still fails its revision check at lookup."""
        if not changed or self.settings.answers.draft_max_age <= 0:
            return
        by_tenant: dict[str | None, set[str]] = {}
        for tenant, document_id in changed:
            by_tenant.setdefault(tenant, set()).add(document_id)
        try:
            store = self._store()
            for tenant, document_ids in by_tenant.items():
                store.purge_documents(tenant, document_ids)
        except StorageError as error:
            logger.warning("previous drafts not purged: %s", error.reason)


def current_revisions(
    index: VectorIndex, eligibility: Eligibility, scope: CallerScope, document_ids: list[str]
) -> dict[str, str] | None:
    """Each document's revision among its live points this caller may see now; ``None``
    when one is absent (gone or not eligible) or shows more than one revision."""
    if scope.sees_nothing:
        return None
    base = eligibility_filter(eligibility, scope)
    point_filter = dataclasses.replace(
        base, must=(*base.must, FieldMatch("document_id", tuple(document_ids)))
    )
    seen: dict[str, set[str]] = {}
    for point in index.scroll(point_filter, payload_fields=("document_id", "revision")):
        payload = point.payload
        seen.setdefault(str(payload.get("document_id")), set()).add(str(payload.get("revision")))
    if any(len(seen.get(d, ())) != 1 for d in document_ids):
        return None
    return {d: next(iter(seen[d])) for d in document_ids}

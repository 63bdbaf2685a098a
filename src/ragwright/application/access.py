"""Who may see what: API keys (make, list, revoke, authenticate) and whether a caller
may still see the documents an answer cites."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragwright.application.callers import evidence_for
from ragwright.application.components import OpenIndex
from ragwright.application.keys import ApiKey, KeyStore
from ragwright.application.outcomes import AnswerOutcome
from ragwright.application.requests.evidence import EvidenceFilter
from ragwright.application.requests.keys import (
    AddKeyRequest,
    AddKeyResult,
    ListKeysResult,
    RevokeKeyRequest,
    RevokeKeyResult,
)
from ragwright.core.eligibility import CallerScope, Eligibility, eligibility_filter
from ragwright.errors import RequestError


class Access:
    """API keys and the eligibility of cited documents for a key's caller."""

    def __init__(
        self,
        document_types: Sequence[str],
        *,
        key_store: Callable[[], KeyStore],
        eligibility: Callable[[EvidenceFilter], Eligibility],
        open_index: OpenIndex,
    ) -> None:
        self.document_types = document_types
        self._key_store = key_store
        self._eligibility = eligibility
        self._open_index = open_index

    def add_key(self, request: AddKeyRequest) -> AddKeyResult:
        """Make an API key; the result holds its secret, which is never shown again.

        Raises:
            RequestError: naming ``types`` when a type is not one of the configured
                document types (a key for it would see nothing).
        """
        known = self.document_types
        for document_type in request.types:
            if document_type not in known:
                raise RequestError(
                    "types",
                    f"unknown document type {document_type!r}; allowed: {', '.join(known)} "
                    "(RAGWRIGHT_DOCUMENT_TYPES)",
                )
        key, secret = self._key_store().add(
            tenant=request.tenant,
            scopes=request.scopes,
            documents=request.documents,
            types=request.types,
            states=request.states,
            name=request.name,
        )
        return AddKeyResult(key, secret)

    def list_keys(self) -> ListKeysResult:
        """Every API key, revoked ones included (no secrets: the store has none)."""
        return ListKeysResult(tuple(self._key_store().list()))

    def revoke_key(self, request: RevokeKeyRequest) -> RevokeKeyResult:
        """Revoke a key: from now on its secret authenticates nothing.

        Raises:
            RequestError: naming ``key_id`` when no key has that id.
        """
        return RevokeKeyResult(self._key_store().revoke(request.key_id))

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key this secret belongs to, else ``None`` (unknown, malformed and
        revoked secrets alike). The caller's tenant, scopes and eligibility come from
        the key, never from the request."""
        return self._key_store().authenticate(secret)

    def key(self, key_id: str) -> ApiKey | None:
        """The key with this id (revoked ones included), else ``None``: a job's worker
        revalidates the submitting caller's current permissions with it.

        Raises:
            StorageError: the key store cannot be read (PostgreSQL down: within its
                connect timeout, so call it off the event loop).
        """
        return self._key_store().get(key_id)

    def changed_citations(self, outcome: AnswerOutcome, key: ApiKey) -> list[str]:
        """The cited documents no longer eligible for ``key``'s caller at the revision the
        answer cited (changed, unpublished, deleted, or out of the key's reach): a result
        is published as current only when this is empty."""
        result = outcome.result
        if not result.citations:
            return []
        by_label = {s.label: s.candidate for s in result.context.sources}
        cited = {c.document_id: by_label[c.label].revision for c in result.citations}
        current = self._eligible_revisions(key, cited, result.citations[0].chunking_version)
        return sorted(d for d, revision in cited.items() if current.get(d) != {revision})

    def ineligible_citations(
        self, key: ApiKey, citations: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """The documents a stored result cites (``citations`` in their JSON form) that
        ``key``'s caller may not see now at any revision: outside its tenant, allowlist,
        document types or publication states, or gone. A job's result is shown to a
        reader only when this is empty (a document that merely changed revision since is
        still the reader's to see).

        Raises:
            VectorIndexError: the index cannot be read.
        """
        if not citations:
            return []
        cited = sorted({str(c["document_id"]) for c in citations})
        version = str(citations[0]["chunking_version"])
        current = self._eligible_revisions(key, cited, version)
        return [d for d in cited if d not in current]

    def _eligible_revisions(
        self, key: ApiKey, document_ids: Iterable[str], chunking_version: str
    ) -> dict[str, set[str]]:
        """The revisions among live points of ``document_ids`` that ``key``'s caller may
        see now (tenant, allowlist, the key's document types and publication states)."""
        eligibility = dataclasses.replace(
            self._eligibility(evidence_for(key, ())),
            chunking_version=chunking_version,
            document_ids=tuple(sorted(document_ids)),
        )
        scope = CallerScope(tenant=key.tenant, allowed_documents=key.documents or None)
        current: dict[str, set[str]] = {}
        index = self._open_index(chunking_version, write=False, any_chunking_version=True)
        try:
            with index.reading():
                for point in index.scroll(
                    eligibility_filter(eligibility, scope),
                    payload_fields=("document_id", "revision"),
                ):
                    document = str(point.payload.get("document_id"))
                    current.setdefault(document, set()).add(str(point.payload.get("revision")))
        finally:
            index.close()
        return current

"""Requests on behalf of an authenticated caller: eligibility comes from the API key.

The HTTP routes and the answer-job worker build their typed requests here, so the rule
"tenant, allowlist, document types and publication states come only from the key; a
request may narrow the documents within the allowlist, never widen it" lives once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ragwright.application.keys import ApiKey
from ragwright.application.requests.evidence import EvidenceFilter
from ragwright.application.requests.questions import AnswerRequest, SearchRequest
from ragwright.chat.contract import ChatMessage, Role
from ragwright.errors import RagwrightError


class OutsideAllowlist(RagwrightError):
    """A request named documents outside its key's allowlist (refused, never dropped)."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.documents = tuple(documents)
        super().__init__(
            f"documents: {len(self.documents)} requested document(s) are outside this "
            f"key's allowlist (first: {self.documents[0]!r})"
        )


def allowed_documents(key: ApiKey, documents: Sequence[str]) -> tuple[str, ...] | None:
    """The key's allowlist (``None``: every document of its tenant).

    Raises:
        OutsideAllowlist: a requested document is not on it.
    """
    if not key.documents:
        return None
    outside = [d for d in documents if d not in key.documents]
    if outside:
        raise OutsideAllowlist(outside)
    return tuple(key.documents)


def evidence_for(key: ApiKey, documents: Sequence[str]) -> EvidenceFilter:
    """The key's eligibility, narrowed to ``documents`` when given."""
    return EvidenceFilter(
        types=key.types, states=key.states, documents=tuple(documents), granted=True
    )


def grant_digest(key: ApiKey) -> str:
    """SHA-256 (hex) of what ``key`` lets its caller see: its tenant, allowlist and
    effective document types and publication states (the defaults applied), each sorted.

    An answer job records it at submission and compares it before running and before
    publishing, so a grant that changed in between fails the job (``permission_changed``)
    instead of being applied silently. Scopes and revocation are checked on their own.
    """
    evidence = evidence_for(key, ())
    grant = {
        "tenant": key.tenant,
        "documents": sorted(key.documents),
        "types": sorted(evidence.effective_types),
        "states": sorted(evidence.effective_states),
    }
    text = json.dumps(grant, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def answer_request_for(
    key: ApiKey,
    *,
    question: str,
    history: Sequence[tuple[Role, str]] = (),
    documents: Sequence[str] = (),
    deadline_seconds: float | None = None,
) -> AnswerRequest:
    """The answer request ``key`` may make (raises ``RequestError`` naming a bad field,
    :class:`OutsideAllowlist`)."""
    allowed = allowed_documents(key, documents)
    return AnswerRequest(
        question,
        evidence=evidence_for(key, documents),
        tenant=key.tenant,
        allowed_documents=allowed,
        history=tuple(ChatMessage(role, content) for role, content in history),
        deadline_seconds=deadline_seconds,
    )


def search_request_for(
    key: ApiKey, *, question: str, k: int = 5, documents: Sequence[str] = ()
) -> SearchRequest:
    """The search request ``key`` may make."""
    allowed = allowed_documents(key, documents)
    return SearchRequest(
        question,
        k=k,
        evidence=evidence_for(key, documents),
        tenant=key.tenant,
        allowed_documents=allowed,
    )

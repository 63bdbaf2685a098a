"""API keys: who may call the HTTP service, for what, and over which documents.

A key binds a caller to trusted context the request itself cannot widen: its tenant
(``None``: only documents without a tenant), its scopes (what it may do; ``admin``
implies every other), and its eligibility (an allowlist of document ids, and the document
types and publication states it may see; empty means every document of the tenant, and
the server's defaults for types and states). The service takes these from the key, never
from the request body.

The secret is shown once, when the key is made (:meth:`KeyStore.add`); a store keeps only
a digest of it, so reading the store gives no way to call the service. Validation lives
here, once, for every store and every entry point: :func:`check_grant` raises a
:class:`~ragwright.errors.RequestError` naming the field and the rule.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragwright.core.chunking import has_control_character
from ragwright.errors import RequestError
from ragwright.types import API_KEY_SCOPES, PUBLICATION_STATES

SCOPES: tuple[str, ...] = API_KEY_SCOPES
"""What a key may do: ``answer`` questions, ``search`` evidence, ``ingest`` documents,
and ``admin`` (manage keys; implies every other scope)."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key without its secret.

    ``id`` is public (it is part of the secret and shown by ``keys list``); ``tenant``
    ``None`` sees only untenanted documents; empty ``documents`` means every document of
    the tenant, empty ``types``/``states`` the server's defaults. ``created_at``,
    ``revoked_at`` and ``last_used_at`` are ISO 8601 UTC to the second (``...Z``);
    ``last_used_at`` is updated at most once a minute, so it is a recency, not a log.
    """

    id: str
    tenant: str | None
    scopes: tuple[str, ...]
    documents: tuple[str, ...]
    types: tuple[str, ...]
    states: tuple[str, ...]
    name: str
    created_at: str
    revoked_at: str | None
    last_used_at: str | None = None

    @property
    def active(self) -> bool:
        """Whether the key still authenticates (it has not been revoked)."""
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        """Whether this key may act under ``scope``: named in its scopes, or ``admin``.
        A revoked key allows nothing.

        Raises:
            ValueError: ``scope`` is not one of :data:`SCOPES` (a bug in the caller: a
                misspelt scope would otherwise deny, or grant, without anyone noticing).
        """
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}; scopes are {', '.join(SCOPES)}")
        return self.active and (scope in self.scopes or "admin" in self.scopes)

    def to_dict(self) -> dict[str, Any]:
        """The key's JSON form; it never holds the secret or its digest."""
        return {
            "id": self.id,
            "name": self.name,
            "tenant": self.tenant,
            "scopes": list(self.scopes),
            "documents": list(self.documents),
            "types": list(self.types),
            "states": list(self.states),
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "last_used_at": self.last_used_at,
            "active": self.active,
        }


class KeyStore(Protocol):
    """Where API keys live. Safe to share between threads, and between processes on one
    store; the secret is returned by :meth:`add` only and never stored in clear."""

    def add(
        self,
        *,
        tenant: str | None,
        scopes: Sequence[str],
        documents: Sequence[str] = (),
        types: Sequence[str] = (),
        states: Sequence[str] = (),
        name: str = "",
    ) -> tuple[ApiKey, str]:
        """Make a key; returns it and its secret (shown here only, never again).

        Raises:
            RequestError: a field breaks a rule of :func:`check_grant`.
        """
        ...

    def list(self) -> builtins.list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        ...

    def get(self, key_id: str) -> ApiKey | None:
        """The key with this id, revoked or not, else ``None`` (one row read: a job's
        worker revalidates the submitting caller with it)."""
        ...

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key; revoking it again keeps the first ``revoked_at``.

        Raises:
            RequestError: naming ``key_id`` when no key has that id.
        """
        ...

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key whose secret this is; ``None`` for an unknown, malformed or
        revoked secret (the caller cannot tell which: all three are refused alike)."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


def check_grant(
    *,
    tenant: str | None,
    scopes: Sequence[str],
    documents: Sequence[str] = (),
    types: Sequence[str] = (),
    states: Sequence[str] = (),
    name: str = "",
) -> None:
    """Refuse a key that could never work as meant: every field is checked here once.

    Raises:
        RequestError: naming the field (``tenant``, ``scopes``, ``documents``, ``types``,
            ``states`` or ``name``) and the rule it breaks.
    """
    if tenant is not None:
        _check_identifier("tenant", tenant, "use no tenant (None, --no-tenant) instead")
    for field_name, values in (
        ("scopes", scopes),
        ("documents", documents),
        ("types", types),
        ("states", states),
    ):
        if isinstance(values, str):
            raise RequestError(field_name, "must be a list of names, not one string")
    if not scopes:
        raise RequestError("scopes", f"must name at least one scope ({', '.join(SCOPES)})")
    for scope in scopes:
        if scope not in SCOPES:
            raise RequestError("scopes", f"unknown scope {scope!r}; allowed: {', '.join(SCOPES)}")
    for document_id in documents:
        _check_identifier("documents", document_id)
    for document_type in types:
        _check_identifier("types", document_type)
    for state in states:
        if state not in PUBLICATION_STATES:
            raise RequestError(
                "states", f"unknown state {state!r}; allowed: {', '.join(PUBLICATION_STATES)}"
            )
    if has_control_character(name):
        raise RequestError("name", "must not contain control characters or line separators")


def unique(values: Sequence[str]) -> tuple[str, ...]:
    """``values`` in their first order without repeats (``--scope search`` twice is one)."""
    return tuple(dict.fromkeys(values))


def _check_identifier(field_name: str, value: str, advice: str = "") -> None:
    # Tenants and document ids are matched exactly against the ids ingest validated
    # (no surrounding whitespace, no control characters), so anything else never matches:
    # a key that silently sees nothing.
    if not value.strip():
        rule = "must not be empty or only whitespace"
        raise RequestError(field_name, f"{rule}; {advice}" if advice else rule)
    if value != value.strip():
        raise RequestError(field_name, f"{value!r} must not start or end with whitespace")
    if has_control_character(value):
        raise RequestError(
            field_name, f"{value!r} must not contain control characters or line separators"
        )

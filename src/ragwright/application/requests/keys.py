"""Requests and results of the API keys' use cases: add, list, revoke."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragwright.application.keys import ApiKey, check_grant
from ragwright.errors import RequestError


@dataclass(frozen=True, slots=True)
class AddKeyRequest:
    """Make an API key for the HTTP service.

    ``tenant`` has no default: a key for untenanted documents (``None``) must be asked
    for as plainly as one for a tenant. ``scopes`` (at least one of
    :data:`~ragwright.application.keys.SCOPES`) say what the key may do; ``documents``
    restricts it to those ids (empty: every document of the tenant); ``types`` and
    ``states`` are the eligibility it may use (empty: the server's defaults). Refused on
    construction, naming the field, when a key so made could not work as meant.
    """

    tenant: str | None
    scopes: tuple[str, ...]
    documents: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        check_grant(
            tenant=self.tenant,
            scopes=self.scopes,
            documents=self.documents,
            types=self.types,
            states=self.states,
            name=self.name,
        )


@dataclass(frozen=True, slots=True)
class AddKeyResult:
    """The new key and its secret: the one time the secret is available."""

    key: ApiKey
    secret: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.secret, **self.key.to_dict()}


@dataclass(frozen=True, slots=True)
class ListKeysResult:
    """Every key, revoked ones included, oldest first (never a secret or a digest)."""

    keys: tuple[ApiKey, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"keys": [key.to_dict() for key in self.keys]}


@dataclass(frozen=True, slots=True)
class RevokeKeyRequest:
    """Revoke the key with this id; revoking a revoked key keeps its first date."""

    key_id: str

    def __post_init__(self) -> None:
        if not self.key_id.strip():
            raise RequestError("key_id", "must not be empty ('keys list' shows the ids)")


@dataclass(frozen=True, slots=True)
class RevokeKeyResult:
    """The revoked key (``revoked_at`` set)."""

    key: ApiKey

    def to_dict(self) -> dict[str, Any]:
        return self.key.to_dict()

"""API key commands: ``keys add``, ``keys list`` and ``keys revoke``.

The operator's side of the HTTP service's authentication: make a key bound to a tenant,
scopes and eligibility, see which keys exist, revoke one. Secrets are printed once, by
``keys add``; nothing else can show them (the store keeps only a digest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ragwright.cli.common import AsJson, app, application, check_choice, print_json
from ragwright.types import API_KEY_SCOPES as SCOPES
from ragwright.types import PUBLICATION_STATES

if TYPE_CHECKING:
    from ragwright.application import ApiKey

keys_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Manage the HTTP service's API keys: add (the secret is shown once), list, revoke.",
)
app.add_typer(keys_app, name="keys")


@keys_app.command("add")
def keys_add(
    scopes: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            metavar="SCOPE",
            help=f"What the key may do (repeatable, required): {', '.join(SCOPES)} "
            "(admin implies every scope).",
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            metavar="TENANT",
            help="The key's tenant: it sees only that tenant's documents.",
        ),
    ] = None,
    no_tenant: Annotated[
        bool,
        typer.Option(
            "--no-tenant", help="The key sees only documents without a tenant (untenanted)."
        ),
    ] = False,
    documents: Annotated[
        list[str] | None,
        typer.Option(
            "--document",
            metavar="ID",
            help="Restrict the key to this document id (repeatable; default: every document "
            "of its tenant).",
        ),
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="Document type the key may use (repeatable; default: the server's, runbook).",
        ),
    ] = None,
    states: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            metavar="STATE",
            help="Publication state the key may use (repeatable; default: the server's, "
            "published).",
        ),
    ] = None,
    name: Annotated[
        str, typer.Option("--name", metavar="NAME", help="A label for people (e.g. who holds it).")
    ] = "",
    as_json: AsJson = False,
) -> None:
    """Make an API key; its secret is printed once and cannot be shown again.

    Exactly one of --tenant TENANT or --no-tenant is required, so a key for untenanted
    documents is never made by omission.
    """
    from ragwright.application import AddKeyRequest

    if (tenant is None) == (not no_tenant):
        raise typer.BadParameter(
            "give exactly one of --tenant TENANT or --no-tenant (untenanted documents only)",
            param_hint="--tenant / --no-tenant",
        )
    if not scopes:
        raise typer.BadParameter(
            f"name at least one scope: {', '.join(SCOPES)}", param_hint="--scope"
        )
    for scope in scopes:
        check_choice(scope, SCOPES, "--scope")
    for state in states or ():
        check_choice(state, PUBLICATION_STATES, "--state")
    result = application().add_key(
        AddKeyRequest(
            tenant=tenant,
            scopes=tuple(scopes),
            documents=tuple(documents or ()),
            types=tuple(types or ()),
            states=tuple(states or ()),
            name=name,
        )
    )
    if as_json:
        print_json(result.to_dict())
        return
    print(f"added API key {_describe(result.key)}")
    print(f"  {_grant(result.key)}")
    print(f"secret: {result.secret}")
    print("Store the secret now: it will not be shown again (only its digest is kept).")


@keys_app.command("list")
def keys_list(as_json: AsJson = False) -> None:
    """List every API key, revoked ones included (never a secret)."""
    result = application().list_keys()
    if as_json:
        print_json(result.to_dict())
        return
    if not result.keys:
        print("no API keys ('ragwright keys add' makes one)")
        return
    for key in result.keys:
        state = f"revoked {key.revoked_at}" if key.revoked_at else "active"
        used = key.last_used_at or "never"
        print(f"{_describe(key)}: {state}; created {key.created_at}; last used {used}")
        print(f"  {_grant(key)}")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The key's id (as 'keys list' shows it).")
    ],
    as_json: AsJson = False,
) -> None:
    """Revoke an API key: its secret authenticates nothing from now on. Revoking it
    again keeps the first date."""
    from ragwright.application import RevokeKeyRequest

    result = application().revoke_key(RevokeKeyRequest(key_id))
    if as_json:
        print_json(result.to_dict())
        return
    print(f"revoked API key {_describe(result.key)} at {result.key.revoked_at}")


def _describe(key: ApiKey) -> str:
    label = f" ({key.name})" if key.name else ""
    tenant = f"tenant {key.tenant}" if key.tenant is not None else "no tenant"
    return f"{key.id}{label}, {tenant}"


def _grant(key: ApiKey) -> str:
    return (
        f"scopes {', '.join(key.scopes)}; "
        f"documents {', '.join(key.documents) or 'all'}; "
        f"types {', '.join(key.types) or 'server default'}; "
        f"states {', '.join(key.states) or 'server default'}"
    )

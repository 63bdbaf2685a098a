"""``ragwright keys``: the secret is printed once, never listed, and works until revoked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragwright.adapters.keys import SqliteKeyStore
from tests.cli import ragwright


def _authenticates(home: Path, secret: str) -> bool:
    store = SqliteKeyStore(home / "keys.sqlite3")
    try:
        return store.authenticate(secret) is not None
    finally:
        store.close()


def test_add_prints_the_secret_once_with_a_warning(tmp_path: Path) -> None:
    added = ragwright(
        "keys",
        "add",
        "--tenant",
        "acme",
        "--scope",
        "search",
        "--name",
        "bot",
        home=tmp_path,
        check=True,
    )
    secrets = [line.split(": ", 1)[1] for line in added.stdout.splitlines() if "secret:" in line]
    assert len(secrets) == 1 and secrets[0].startswith("rwk_")
    assert added.stdout.count(secrets[0]) == 1
    assert "will not be shown again" in added.stdout
    assert "tenant acme" in added.stdout and "bot" in added.stdout
    assert _authenticates(tmp_path, secrets[0])


def test_add_json_holds_the_secret_in_key_and_the_grant(tmp_path: Path) -> None:
    added = json.loads(
        ragwright(
            "keys",
            "add",
            "--no-tenant",
            "--scope",
            "answer",
            "--scope",
            "search",
            "--document",
            "faq",
            "--type",
            "note",
            "--state",
            "draft",
            "--json",
            home=tmp_path,
            check=True,
        ).stdout
    )
    assert added["key"].startswith(f"rwk_{added['id']}_")
    assert added["tenant"] is None and added["scopes"] == ["answer", "search"]
    assert (added["documents"], added["types"], added["states"]) == (["faq"], ["note"], ["draft"])
    assert added["active"] is True and added["revoked_at"] is None
    assert _authenticates(tmp_path, added["key"])


def test_list_never_shows_a_secret_or_its_digest(tmp_path: Path) -> None:
    added = json.loads(
        ragwright(
            "keys",
            "add",
            "--tenant",
            "acme",
            "--scope",
            "admin",
            "--json",
            home=tmp_path,
            check=True,
        ).stdout
    )
    secret = added["key"]
    digest = hashlib.sha256(secret.encode()).hexdigest()
    text = ragwright("keys", "list", home=tmp_path, check=True).stdout
    listed = ragwright("keys", "list", "--json", home=tmp_path, check=True).stdout
    for output in (text, listed):
        assert secret not in output and secret.split("_", 2)[2] not in output
        assert digest not in output
    assert added["id"] in text and "active" in text
    assert [k["id"] for k in json.loads(listed)["keys"]] == [added["id"]]
    assert "key" not in json.loads(listed)["keys"][0]


def test_revoke_stops_the_secret_and_shows_in_list(tmp_path: Path) -> None:
    added = json.loads(
        ragwright(
            "keys",
            "add",
            "--tenant",
            "acme",
            "--scope",
            "search",
            "--json",
            home=tmp_path,
            check=True,
        ).stdout
    )
    revoked = json.loads(
        ragwright("keys", "revoke", added["id"], "--json", home=tmp_path, check=True).stdout
    )
    assert revoked["id"] == added["id"] and revoked["active"] is False
    assert not _authenticates(tmp_path, added["key"])
    listed = ragwright("keys", "list", home=tmp_path, check=True).stdout
    assert f"revoked {revoked['revoked_at']}" in listed
    again = ragwright("keys", "revoke", added["id"], home=tmp_path, check=True).stdout
    assert revoked["revoked_at"] in again  # the first date is kept


def test_revoking_an_unknown_id_fails_naming_it(tmp_path: Path) -> None:
    result = ragwright("keys", "revoke", "0123456789ab", home=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: key_id: no API key has id '0123456789ab' ('keys list' shows them)"
    )


def test_list_of_an_empty_store_says_so(tmp_path: Path) -> None:
    assert "no API keys" in ragwright("keys", "list", home=tmp_path, check=True).stdout
    assert json.loads(ragwright("keys", "list", "--json", home=tmp_path, check=True).stdout) == {
        "keys": []
    }


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--scope", "search"), "--tenant / --no-tenant"),
        (("--scope", "search", "--tenant", "acme", "--no-tenant"), "--tenant / --no-tenant"),
        (("--tenant", "acme"), "--scope"),
        (("--tenant", "acme", "--scope", "write"), "--scope"),
    ],
)
def test_add_usage_errors_name_the_options(
    tmp_path: Path, argv: tuple[str, ...], named: str
) -> None:
    result = ragwright("keys", "add", *argv, home=tmp_path)
    assert result.returncode == 2 and named in result.stderr
    assert not (tmp_path / "keys.sqlite3").exists()


def test_an_invalid_field_fails_naming_it(tmp_path: Path) -> None:
    result = ragwright(
        "keys", "add", "--tenant", "acme", "--scope", "search", "--document", " ", home=tmp_path
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: documents: must not be empty")

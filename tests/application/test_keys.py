"""API keys: stored as a digest only, bound to tenant, scopes and eligibility, refused
alike when unknown, malformed or revoked; validated once, naming the field."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
from ragwright.application import (
    SCOPES,
    AddKeyRequest,
    ApiKey,
    KeyStore,
    RevokeKeyRequest,
)
from ragwright.errors import RequestError, StorageError
from ragwright.runtime import RuntimeComponents
from ragwright.settings import load_settings
from ragwright.testing.fakes import ManualClock
from tests.application.components import fake_application
from tests.application.postgres import POSTGRES_URL, fresh_schema

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sqlite_store(tmp_path: Path, clock: ManualClock) -> Iterator[SqliteKeyStore]:
    keys = SqliteKeyStore(tmp_path / "keys.sqlite3", clock=clock)
    yield keys
    keys.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[KeyStore]:
    """Each store-level test runs on both stores: one file, and a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        keys: KeyStore = SqliteKeyStore(tmp_path / "keys.sqlite3", clock=clock)
        yield keys
        keys.close()
        return
    with fresh_schema() as schema:
        keys = PostgresKeyStore(POSTGRES_URL, schema, clock=clock)
        yield keys
        keys.close()


def _stored_bytes(path: Path) -> bytes:
    # With WAL, recent writes may sit in the -wal file until a checkpoint.
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_the_store_satisfies_the_protocol(store: KeyStore) -> None:
    assert store.list() == []


# --- at rest ---------------------------------------------------------------------------


def test_only_the_digest_of_the_secret_is_stored(sqlite_store: SqliteKeyStore) -> None:
    store = sqlite_store
    key, secret = store.add(tenant="acme", scopes=("search",))
    # The random part is base64url and may itself hold "_": split after the id, never at
    # the last "_" (which once left a 1-character "random" that the file held by chance).
    random = secret.split("_", 2)[2]
    assert len(random) == 43
    digest = hashlib.sha256(secret.encode()).hexdigest().encode()
    while_open = _stored_bytes(store.path)
    store.close()  # the close checkpoints everything into the file itself
    for data in (while_open, store.path.read_bytes()):
        assert secret.encode() not in data and random.encode() not in data
        assert digest in data  # the right bytes were read: the digest is there
        assert key.id.encode() in data


def test_postgres_stores_only_the_digest_of_the_secret(clock: ManualClock) -> None:
    with fresh_schema() as schema:
        store = PostgresKeyStore(POSTGRES_URL, schema, clock=clock)
        key, secret = store.add(tenant="acme", scopes=("search",))
        store.close()
        with psycopg.connect(POSTGRES_URL) as db:
            rows = db.execute(f'SELECT * FROM "{schema}".api_keys').fetchall()
    text = repr(rows)
    assert secret not in text and secret.split("_", 2)[2] not in text
    assert hashlib.sha256(secret.encode()).hexdigest() in text  # the right rows were read
    assert key.id in text


def test_the_secret_has_the_documented_form(store: KeyStore) -> None:
    key, secret = store.add(tenant=None, scopes=("answer",))
    prefix, key_id, random = secret.split("_", 2)
    assert (prefix, key_id) == ("rwk", key.id)
    assert len(key.id) == 12 and int(key.id, 16) >= 0
    assert len(random) == 43  # token_urlsafe(32): 256 random bits


def test_the_store_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "new" / "keys.sqlite3"
    keys = SqliteKeyStore(path)
    keys.add(tenant="acme", scopes=("search",))
    for created in (path, Path(f"{path}-wal")):
        assert stat.S_IMODE(created.stat().st_mode) == 0o600, created
    keys.close()


def test_a_key_json_form_never_holds_the_secret_or_digest(store: KeyStore) -> None:
    key, secret = store.add(tenant="acme", scopes=("search",), name="ops")
    text = json.dumps([key.to_dict(), *(k.to_dict() for k in store.list())])
    assert secret not in text
    assert hashlib.sha256(secret.encode()).hexdigest() not in text
    assert set(key.to_dict()) == {
        "id",
        "name",
        "tenant",
        "scopes",
        "documents",
        "types",
        "states",
        "created_at",
        "revoked_at",
        "last_used_at",
        "active",
    }


# --- authenticate ----------------------------------------------------------------------


def test_a_secret_authenticates_as_its_key_with_its_grant(store: KeyStore) -> None:
    key, secret = store.add(
        tenant="acme",
        scopes=("search", "answer", "search"),
        documents=("faq", "escalation"),
        types=("note",),
        states=("draft", "published"),
        name="support bot",
    )
    found = store.authenticate(secret)
    assert found is not None
    assert (found.id, found.tenant, found.scopes) == (key.id, "acme", ("search", "answer"))
    assert (found.documents, found.types, found.states) == (
        ("faq", "escalation"),
        ("note",),
        ("draft", "published"),
    )
    assert (found.name, found.created_at, found.active) == ("support bot", key.created_at, True)
    assert found.created_at == "2027-01-15T08:00:00Z"


def _unknown_id(secret: str) -> str:
    prefix, key_id, random = secret.split("_", 2)
    other = "0" * 12 if key_id != "0" * 12 else "1" * 12
    return f"{prefix}_{other}_{random}"


def _other_random(secret: str) -> str:
    prefix, key_id, random = secret.split("_", 2)
    return f"{prefix}_{key_id}_{'A' if random[0] != 'A' else 'B'}{random[1:]}"


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(_unknown_id, id="unknown id"),
        pytest.param(_other_random, id="right id, wrong secret"),
        pytest.param(lambda s: "", id="empty"),
        pytest.param(lambda s: s + "x", id="one character more"),
        pytest.param(lambda s: s[:-1], id="one character less"),
        pytest.param(lambda s: "Bearer " + s, id="with a scheme"),
        pytest.param(lambda s: s.replace("rwk_", "rwx_", 1), id="other prefix"),
        pytest.param(lambda s: s.upper(), id="upper case"),
        pytest.param(lambda s: s.split("_", 2)[1], id="the id alone"),
        pytest.param(lambda s: hashlib.sha256(s.encode()).hexdigest(), id="the digest"),
    ],
)
def test_unknown_and_malformed_secrets_authenticate_nothing(store: KeyStore, forge: Any) -> None:
    _, secret = store.add(tenant="acme", scopes=("admin",))
    assert store.authenticate(forge(secret)) is None
    assert store.authenticate(secret) is not None


def test_a_revoked_key_authenticates_nothing(store: KeyStore) -> None:
    key, secret = store.add(tenant="acme", scopes=("search",))
    kept, kept_secret = store.add(tenant="acme", scopes=("search",))
    revoked = store.revoke(key.id)
    assert not revoked.active and revoked.revoked_at is not None
    assert store.authenticate(secret) is None
    still = store.authenticate(kept_secret)  # the other key still works
    assert still is not None and still.id == kept.id and store.list()[1].id == kept.id


def test_a_key_is_read_by_its_id_revoked_ones_included(store: KeyStore) -> None:
    key, _ = store.add(tenant="acme", scopes=("answer",), types=("runbook",), name="jobs")
    other, _ = store.add(tenant=None, scopes=("search",))
    assert store.get(key.id) == key
    store.revoke(other.id)
    revoked = store.get(other.id)
    assert revoked is not None and revoked.id == other.id and not revoked.active
    assert store.get("0123456789ab") is None


def test_revoking_twice_keeps_the_first_date(store: KeyStore, clock: ManualClock) -> None:
    key, _ = store.add(tenant=None, scopes=("search",))
    first = store.revoke(key.id).revoked_at
    clock.advance(3600)
    assert store.revoke(key.id).revoked_at == first == "2027-01-15T08:00:00Z"


def test_revoking_an_unknown_id_is_refused_naming_it(store: KeyStore) -> None:
    store.add(tenant=None, scopes=("search",))
    with pytest.raises(RequestError) as raised:
        store.revoke("0123456789ab")
    assert raised.value.field == "key_id" and "'0123456789ab'" in raised.value.rule
    assert all(k.active for k in store.list())


def test_last_use_is_recorded_at_most_once_a_minute(store: KeyStore, clock: ManualClock) -> None:
    _, secret = store.add(tenant="acme", scopes=("search",))
    assert store.list()[0].last_used_at is None
    first = store.authenticate(secret)
    assert first is not None and first.last_used_at == "2027-01-15T08:00:00Z"
    clock.advance(59)
    assert store.authenticate(secret) is not None
    assert store.list()[0].last_used_at == "2027-01-15T08:00:00Z"
    clock.advance(1)
    again = store.authenticate(secret)
    assert again is not None and again.last_used_at == "2027-01-15T08:01:00Z"
    assert store.list()[0].last_used_at == "2027-01-15T08:01:00Z"


def test_authentication_survives_a_store_it_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    writer = SqliteKeyStore(path, busy_timeout=0)
    _, secret = writer.add(tenant="acme", scopes=("search",))
    # Another connection holds the write lock: recording the use cannot wait for it.
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        found = writer.authenticate(secret)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert found is not None and found.last_used_at is None
    writer.close()


# --- scopes ------------------------------------------------------------------------------


def _key(scopes: tuple[str, ...], revoked_at: str | None = None) -> ApiKey:
    return ApiKey("a" * 12, None, scopes, (), (), (), "", "2027-01-15T08:00:00Z", revoked_at)


@pytest.mark.parametrize(
    ("scopes", "allowed"),
    [
        (("search",), {"search"}),
        (("answer", "search"), {"answer", "search"}),
        (("ingest",), {"ingest"}),
        (("admin",), set(SCOPES)),
    ],
)
def test_a_key_allows_its_scopes_and_admin_allows_every_scope(
    scopes: tuple[str, ...], allowed: set[str]
) -> None:
    assert {s for s in SCOPES if _key(scopes).allows(s)} == allowed


def test_a_revoked_key_allows_nothing() -> None:
    assert not any(_key(("admin",), "2027-01-15T08:00:00Z").allows(s) for s in SCOPES)


def test_asking_for_an_unknown_scope_is_a_bug_that_raises() -> None:
    with pytest.raises(ValueError, match="'serch'"):
        _key(("admin",)).allows("serch")


# --- validation --------------------------------------------------------------------------

INVALID: list[tuple[dict[str, Any], str, str]] = [
    ({"scopes": ("serch",)}, "scopes", "allowed: answer, search, ingest, admin"),
    ({"scopes": ()}, "scopes", "at least one scope"),
    ({"scopes": "search"}, "scopes", "not one string"),
    ({"tenant": ""}, "tenant", "must not be empty"),
    ({"tenant": "  "}, "tenant", "must not be empty"),
    ({"tenant": " acme"}, "tenant", "whitespace"),
    ({"tenant": "ac\nme"}, "tenant", "control characters"),
    ({"documents": ("faq", " ")}, "documents", "must not be empty"),
    ({"documents": ("",)}, "documents", "must not be empty"),
    ({"documents": ("faq ",)}, "documents", "whitespace"),
    ({"types": ("",)}, "types", "must not be empty"),
    ({"states": ("public",)}, "states", "allowed: published, draft"),
    ({"name": "ops\nadmin"}, "name", "control characters"),
]


@pytest.mark.parametrize(
    ("change", "field", "rule"), INVALID, ids=[f"{c[1]}={c[0][c[1]]!r}" for c in INVALID]
)
def test_an_invalid_grant_is_refused_naming_the_field(
    store: SqliteKeyStore, change: dict[str, Any], field: str, rule: str
) -> None:
    fields: dict[str, Any] = {"tenant": "acme", "scopes": ("search",), **change}
    for make in (lambda: store.add(**fields), lambda: AddKeyRequest(**fields)):
        with pytest.raises(RequestError) as raised:
            make()
        assert raised.value.field == field and rule in raised.value.rule
    assert store.list() == []


def test_a_blank_key_id_is_refused_before_the_store() -> None:
    with pytest.raises(RequestError) as raised:
        RevokeKeyRequest(" ")
    assert raised.value.field == "key_id"


# --- sharing -------------------------------------------------------------------------------


def test_two_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    first, second = SqliteKeyStore(path), SqliteKeyStore(path)
    key, secret = first.add(tenant="acme", scopes=("search",))
    assert second.authenticate(secret) is not None
    assert [k.id for k in second.list()] == [key.id]
    second.revoke(key.id)
    assert first.authenticate(secret) is None
    assert first.list() == second.list()
    first.close()
    second.close()


def test_two_postgres_stores_like_two_replicas_see_each_others_writes() -> None:
    with fresh_schema() as schema:
        first = PostgresKeyStore(POSTGRES_URL, schema)
        second = PostgresKeyStore(POSTGRES_URL, schema)  # the schema exists: not recreated
        key, secret = first.add(tenant="acme", scopes=("search",))
        assert second.authenticate(secret) is not None
        second.revoke(key.id)
        assert first.authenticate(secret) is None
        assert first.list() == second.list()
        first.close()
        second.close()


def test_a_postgres_key_store_recovers_at_once_after_its_connections_are_killed() -> None:
    # Regression (issue 12, PostgreSQL restart fault): the pool lent its dead
    # connections after a restart, so the first requests were 503 keys-unavailable.
    with fresh_schema() as schema:
        store = PostgresKeyStore(POSTGRES_URL, schema)
        try:
            _, secret = store.add(tenant="acme", scopes=("answer",))
            # What a server restart does to open connections: the server ends them.
            with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
                killed = db.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (f"ragwright-{schema}",),
                ).fetchone()
            assert killed is not None and killed[0] >= 1
            assert store.authenticate(secret) is not None
        finally:
            store.close()


def test_threads_share_one_store(store: KeyStore) -> None:
    _, secret = store.add(tenant="acme", scopes=("search",))
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(25):
                assert store.authenticate(secret) is not None
                store.add(tenant="acme", scopes=("answer",))
        except BaseException as error:  # reported below, on the test's thread
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(store.list()) == 1 + 6 * 25


ADD_MANY = """
import sys
from pathlib import Path
import psycopg

from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
store = SqliteKeyStore(Path(sys.argv[1]))
for _ in range(30):
    store.add(tenant=sys.argv[2], scopes=("search",))
store.close()
"""


def test_processes_share_one_store(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", ADD_MANY, str(path), f"t{n}"], stderr=subprocess.PIPE
        )
        for n in range(3)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 0, stderr.decode()
    store = SqliteKeyStore(path)
    keys = store.list()
    store.close()
    assert len({k.id for k in keys}) == 90
    assert {k.tenant for k in keys} == {"t0", "t1", "t2"}


# --- damaged or foreign files --------------------------------------------------------------


def test_a_file_that_is_not_a_key_store_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    path.write_bytes(b"not a database, just some bytes" * 100)
    with pytest.raises(StorageError) as raised:
        SqliteKeyStore(path)
    assert raised.value.path == str(path)


def test_a_database_of_something_else_is_refused_not_extended(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(StorageError) as raised:
        SqliteKeyStore(path)
    assert "not an API key store" in raised.value.reason
    with sqlite3.connect(path) as db:
        tables = db.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("notes",)]


def test_a_newer_schema_is_refused_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    SqliteKeyStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 2")
    with pytest.raises(StorageError) as raised:
        SqliteKeyStore(path)
    assert "schema version 2" in raised.value.reason
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2


# --- the application and the composition root ----------------------------------------------


def test_the_application_adds_lists_revokes_and_authenticates(tmp_path: Path) -> None:
    app, _ = fake_application(tmp_path / "home")
    added = app.add_key(AddKeyRequest(tenant="acme", scopes=("answer",), name="bot"))
    assert added.to_dict()["key"] == added.secret and added.to_dict()["id"] == added.key.id
    assert app.authenticate(added.secret) == app.list_keys().keys[0]
    assert app.list_keys().to_dict()["keys"][0]["name"] == "bot"
    assert added.secret not in json.dumps(app.list_keys().to_dict())
    revoked = app.revoke_key(RevokeKeyRequest(added.key.id))
    assert revoked.to_dict()["active"] is False
    assert app.authenticate(added.secret) is None
    assert (tmp_path / "home" / "keys.sqlite3").is_file()


def test_a_type_outside_the_configured_document_types_is_refused(tmp_path: Path) -> None:
    app, _ = fake_application(tmp_path / "home", document_types=("runbook", "faq"))
    app.add_key(AddKeyRequest(tenant=None, scopes=("search",), types=("faq",)))
    with pytest.raises(RequestError) as raised:
        app.add_key(AddKeyRequest(tenant=None, scopes=("search",), types=("note",)))
    assert raised.value.field == "types" and "runbook, faq" in raised.value.rule
    assert len(app.list_keys().keys) == 1


def test_the_key_store_lives_where_the_settings_say(tmp_path: Path) -> None:
    home = RuntimeComponents(load_settings(home=tmp_path / "home"))
    store = home.key_store()
    assert isinstance(store, SqliteKeyStore)
    assert store.path == tmp_path / "home" / "keys.sqlite3"
    assert home.key_store() is store
    elsewhere = RuntimeComponents(
        load_settings(home=tmp_path / "home", keys_path=tmp_path / "secure" / "k.db")
    )
    other = elsewhere.key_store()
    assert isinstance(other, SqliteKeyStore) and other.path == tmp_path / "secure" / "k.db"
    assert (tmp_path / "secure" / "k.db").is_file()
    store.close()
    other.close()


def test_with_a_database_url_the_key_store_is_postgres(tmp_path: Path) -> None:
    components = RuntimeComponents(load_settings(home=tmp_path / "home", database_url=POSTGRES_URL))
    store = components.key_store()
    try:
        assert isinstance(store, PostgresKeyStore)
        assert components.key_store() is store
        assert not (tmp_path / "home" / "keys.sqlite3").exists()
    finally:
        # It wrote nothing: the default schema ("ragwright") and its tables may stay.
        store.close()


def test_a_newer_postgres_key_schema_is_refused_not_rewritten() -> None:
    with fresh_schema() as schema:
        PostgresKeyStore(POSTGRES_URL, schema).close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
            db.execute(
                f"UPDATE \"{schema}\".schema_versions SET version = 2 WHERE component = 'api_keys'"
            )
        with pytest.raises(StorageError) as raised:
            PostgresKeyStore(POSTGRES_URL, schema)
        assert "api_keys schema version 2" in raised.value.reason
        assert "127.0.0.1:5432" in raised.value.path and "postgres@" not in raised.value.path

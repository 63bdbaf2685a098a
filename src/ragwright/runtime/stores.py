"""The key, job and draft stores: SQLite files in the home, or PostgreSQL with
``RAGWRIGHT_DATABASE_URL`` (every replica then shares them), and the ingest queue."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, overload

from ragwright.application.drafts import DraftStore
from ragwright.application.ingest_queue import IngestQueue
from ragwright.application.jobs import JobStore
from ragwright.application.keys import KeyStore
from ragwright.errors import ConfigError
from ragwright.runtime.registry import Closable, Registry
from ragwright.settings import Settings

SETTING = "RAGWRIGHT_DATABASE_URL"

S = TypeVar("S", bound=Closable)
StoreFactory = Callable[[Settings], S]


def _database_url(settings: Settings) -> str:
    url = settings.storage.database_url
    if url is None:
        raise ConfigError(SETTING, "required for a PostgreSQL store")
    return url.get_secret_value()


# The store modules are imported when a store opens, not with the runtime: each holds its
# PostgreSQL class too, and psycopg's import is 0.2 s of every command's start, most of
# which never open a store.


def _sqlite_keys(settings: Settings) -> KeyStore:
    from ragwright.adapters.keys import SqliteKeyStore

    return SqliteKeyStore(settings.key_store_path)


def _postgres_keys(settings: Settings) -> KeyStore:
    from ragwright.adapters.keys import PostgresKeyStore

    return PostgresKeyStore(_database_url(settings))


def _sqlite_jobs(settings: Settings) -> JobStore:
    from ragwright.adapters.jobs import SqliteJobStore

    return SqliteJobStore(settings.storage.home / "jobs.sqlite3")


def _postgres_jobs(settings: Settings) -> JobStore:
    from ragwright.adapters.jobs import PostgresJobStore

    return PostgresJobStore(_database_url(settings))


def _sqlite_drafts(settings: Settings) -> DraftStore:
    from ragwright.adapters.drafts import SqliteDraftStore

    return SqliteDraftStore(settings.storage.home / "drafts.sqlite3")


def _postgres_drafts(settings: Settings) -> DraftStore:
    from ragwright.adapters.drafts_postgres import PostgresDraftStore

    return PostgresDraftStore(_database_url(settings))


KEY_STORES: Registry[StoreFactory[KeyStore]] = Registry(
    SETTING, {"sqlite": _sqlite_keys, "postgres": _postgres_keys}
)
JOB_STORES: Registry[StoreFactory[JobStore]] = Registry(
    SETTING, {"sqlite": _sqlite_jobs, "postgres": _postgres_jobs}
)
DRAFT_STORES: Registry[StoreFactory[DraftStore]] = Registry(
    SETTING, {"sqlite": _sqlite_drafts, "postgres": _postgres_drafts}
)


def store_engine(settings: Settings) -> str:
    """``postgres`` when ``RAGWRIGHT_DATABASE_URL`` is set, else ``sqlite``."""
    return "sqlite" if settings.storage.database_url is None else "postgres"


class HasSettings(Protocol):
    settings: Settings


class LazyStore(Generic[S]):
    """A store attribute opened on first read, with the configured engine, and shared
    by every thread after (one connection pool): a service's first requests may arrive
    together on several threads.

    The store lives in the instance's ``__dict__`` under the attribute's name, so once
    open a read costs a dict lookup (and a test may set the attribute to a store of its
    own). :meth:`close` closes it; the next read opens a new one.
    """

    _lock = threading.Lock()

    def __init__(self, stores: Registry[StoreFactory[S]]) -> None:
        self.stores = stores
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> LazyStore[S]: ...

    @overload
    def __get__(self, instance: HasSettings, owner: type) -> S: ...

    def __get__(self, instance: HasSettings | None, owner: type) -> LazyStore[S] | S:
        if instance is None:
            return self
        with self._lock:
            store: S | None = instance.__dict__.get(self.name)
            if store is None:
                settings = instance.settings
                store = self.stores[store_engine(settings)](settings)
                instance.__dict__[self.name] = store
            return store

    def close(self, instance: HasSettings) -> None:
        """Close ``instance``'s store if it was opened."""
        with self._lock:
            store: S | None = instance.__dict__.pop(self.name, None)
        if store is not None:
            store.close()


def open_ingest_queue(settings: Settings) -> IngestQueue:
    """The queue of ingest work items in PostgreSQL (the caller closes it)."""
    url = settings.storage.database_url
    if url is None:
        raise ConfigError(
            SETTING,
            "required for queued ingestion: the coordinator and every worker share "
            "the queue of work items in PostgreSQL",
        )
    from ragwright.adapters.ingest_queue import PgQueuerIngestQueue  # loads pgqueuer

    return PgQueuerIngestQueue(url.get_secret_value(), lease=settings.ingest.lease)

"""The key, job and draft stores: SQLite files in the home, or PostgreSQL with
``RAGWRIGHT_DATABASE_URL`` (every replica then shares them), and the ingest queue."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, overload

from ragwright.adapters.drafts import PostgresDraftStore, SqliteDraftStore
from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
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


KEY_STORES: Registry[StoreFactory[KeyStore]] = Registry(
    SETTING,
    {
        "sqlite": lambda settings: SqliteKeyStore(settings.key_store_path),
        "postgres": lambda settings: PostgresKeyStore(_database_url(settings)),
    },
)
JOB_STORES: Registry[StoreFactory[JobStore]] = Registry(
    SETTING,
    {
        "sqlite": lambda settings: SqliteJobStore(settings.storage.home / "jobs.sqlite3"),
        "postgres": lambda settings: PostgresJobStore(_database_url(settings)),
    },
)
DRAFT_STORES: Registry[StoreFactory[DraftStore]] = Registry(
    SETTING,
    {
        "sqlite": lambda settings: SqliteDraftStore(settings.storage.home / "drafts.sqlite3"),
        "postgres": lambda settings: PostgresDraftStore(_database_url(settings)),
    },
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

"""The key, job and draft stores: SQLite files in the home, or PostgreSQL with
``RAGWRIGHT_DATABASE_URL`` (every replica then shares them), and the ingest queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ragwright.adapters.drafts import PostgresDraftStore, SqliteDraftStore
from ragwright.adapters.jobs import PostgresJobStore, SqliteJobStore
from ragwright.adapters.keys import PostgresKeyStore, SqliteKeyStore
from ragwright.application.drafts import DraftStore
from ragwright.application.ingest_queue import IngestQueue
from ragwright.application.jobs import JobStore
from ragwright.application.keys import KeyStore
from ragwright.errors import ConfigError
from ragwright.runtime.registry import Closable, Lazy, Registry
from ragwright.settings import Settings

SETTING = "RAGWRIGHT_DATABASE_URL"

S = TypeVar("S", bound=Closable)
StoreFactory = Callable[[Settings], S]


def _database_url(settings: Settings) -> str:
    url = settings.database_url
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
        "sqlite": lambda settings: SqliteJobStore(settings.home / "jobs.sqlite3"),
        "postgres": lambda settings: PostgresJobStore(_database_url(settings)),
    },
)
DRAFT_STORES: Registry[StoreFactory[DraftStore]] = Registry(
    SETTING,
    {
        "sqlite": lambda settings: SqliteDraftStore(settings.home / "drafts.sqlite3"),
        "postgres": lambda settings: PostgresDraftStore(_database_url(settings)),
    },
)


def store_engine(settings: Settings) -> str:
    """``postgres`` when ``RAGWRIGHT_DATABASE_URL`` is set, else ``sqlite``."""
    return "sqlite" if settings.database_url is None else "postgres"


def lazy_store(settings: Settings, stores: Registry[StoreFactory[S]]) -> Lazy[S]:
    """The store of the configured engine, opened on first use and shared after."""
    return Lazy(lambda: stores[store_engine(settings)](settings))


def open_ingest_queue(settings: Settings) -> IngestQueue:
    """The queue of ingest work items in PostgreSQL (the caller closes it)."""
    url = settings.database_url
    if url is None:
        raise ConfigError(
            SETTING,
            "required for queued ingestion: the coordinator and every worker share "
            "the queue of work items in PostgreSQL",
        )
    from ragwright.adapters.ingest_queue import PgQueuerIngestQueue  # loads pgqueuer

    return PgQueuerIngestQueue(url.get_secret_value(), lease=settings.ingest_lease)

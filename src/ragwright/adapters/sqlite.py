"""What every SQLite store of ragwright shares (API keys, drafts, answer jobs).

One file per store, private to its owner (mode 0600 before SQLite first opens it), one
connection shared by the process's threads under a lock, WAL, a busy timeout, and
autocommit: every write opens its own ``BEGIN IMMEDIATE``, so it takes the write lock up
front and waits for it (``busy_timeout``) instead of failing when a read would have to
upgrade. Several processes may open the same file.

Every ``sqlite3`` error, the ``COMMIT``'s included (a full disk refuses the commit, not
the statements before it), leaves a store as :class:`StorageError`: callers (the job
runner above all) handle one error type for "the store cannot do this now".
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ragwright.adapters.queries.dialect import SqlSession
from ragwright.errors import StorageError

BUSY_TIMEOUT = 5.0


def create_private(path: Path) -> None:
    """Create the file readable and writable by its owner only, before SQLite opens it
    (SQLite would create it with the process umask, typically world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class SqliteFile:
    """A store's file, opened and checked by :meth:`_open`; subclasses name themselves
    (``what``) and bring ``_migrate``, run once inside the open."""

    what = "store"

    def _open(
        self,
        path: Path,
        busy_timeout: float,
        *pragmas: str,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        """Open ``path`` (created private), apply the shared and the store's own
        ``pragmas``, then ``_migrate``; any failure is one :class:`StorageError`.
        ``factory`` is the connection class (a test passes one that injects faults).

        Raises:
            StorageError: the file cannot be opened, is another store or a newer schema,
                or another process held it past ``busy_timeout``.
        """
        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        create_private(path)
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, factory=factory
            )
        except sqlite3.Error as error:
            raise StorageError(str(path), f"cannot open the {self.what}: {error}") from error
        try:
            self._db.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            for pragma in pragmas:
                self._db.execute(f"PRAGMA {pragma}")
            self._migrate()
        except sqlite3.Error as error:
            self._db.close()
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY:
                reason = f"another process held the {self.what} longer than {busy_timeout} s"
            else:
                reason = f"not a readable {self.what} ({error})"
            raise StorageError(str(path), reason) from error
        except StorageError:
            self._db.close()
            raise

    def _migrate(self) -> None:
        raise NotImplementedError

    def _create_versioned(self, create: Sequence[str], version: int, what: str) -> None:
        """Create the tables of a new file under ``PRAGMA user_version`` = ``version``, or
        check an existing file's version. A new file that already holds tables is someone
        else's database (a mistyped path): nothing is added to it.

        Raises:
            StorageError: the file holds other tables, or another schema version.
        """
        with self._write() as db:
            found = db.execute("PRAGMA user_version").fetchone()[0]
            if found == 0:
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StorageError(str(self.path), f"holds other tables: not {what}")
                for statement in create:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {version}")
            elif found != version:
                raise StorageError(
                    str(self.path),
                    f"{what.split(' ', 1)[1]} schema version {found}, this ragwright reads "
                    f"{version}; use the ragwright that wrote it",
                )

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    @contextlib.contextmanager
    def _read(self, doing: str = "") -> Iterator[sqlite3.Connection]:
        """The connection for reads; ``doing`` prefixes the error (``drafts not read``)."""
        with self._lock:
            self._check_open()
            try:
                yield self._db
            except sqlite3.Error as error:
                raise self._failed(error, doing or f"the {self.what} could not be read") from error

    @contextlib.contextmanager
    def _write(
        self, doing: str = "", *, begin: str = "BEGIN IMMEDIATE"
    ) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` .. ``COMMIT``; rolled back on any error, and every
        ``sqlite3`` error (``BEGIN``, a statement, ``COMMIT``) is a :class:`StorageError`.
        ``begin="BEGIN"`` makes it a read of one snapshot that takes no write lock."""
        doing = doing or f"the {self.what} refused a write"
        with self._lock:
            self._check_open()
            try:
                self._db.execute(begin)
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    rollback(self._db)
                    raise
            except sqlite3.Error as error:
                raise self._failed(error, doing) from error

    @contextlib.contextmanager
    def _session(self, doing: str = "", *, write: bool = True) -> Iterator[SqlSession]:
        """:meth:`_write` (or :meth:`_read`) for the statements of a query module."""
        with self._write(doing) if write else self._read(doing) as db:
            yield SqlSession(db)

    def _failed(self, error: sqlite3.Error, doing: str) -> StorageError:
        return storage_error(str(self.path), error, doing, what=self.what)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(str(self.path), f"the {self.what} is closed")


def rollback(db: sqlite3.Connection) -> None:
    """Roll back an open transaction, if any. A failed ``COMMIT`` may leave none (SQLite
    rolled it back itself), and a rollback that fails too leaves the original error
    as the one to report."""
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def storage_error(where: str, error: sqlite3.Error, doing: str, *, what: str) -> StorageError:
    """``error`` as the :class:`StorageError` a store raises: ``doing: error``, or that
    another process held the file past the busy timeout."""
    if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY:
        return StorageError(where, f"{doing}: another process held the {what} too long ({error})")
    return StorageError(where, f"{doing}: {error}")

"""A SQLite disk that fills up on demand: a connection class whose ``COMMIT`` fails as a
full disk makes it fail (``sqlite3.OperationalError: database or disk is full``) while
``DiskFull.full`` is set, for a transaction that changed rows; reads and transactions
that changed nothing commit (SQLite writes nothing for them). Stores take it through
their ``factory`` argument."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any


class DiskFull:
    """The switch, and the count of commits it refused."""

    def __init__(self) -> None:
        self.full = False
        self.refused = 0
        self._lock = threading.Lock()

    @property
    def factory(self) -> type[sqlite3.Connection]:
        disk = self

        class FillingConnection(sqlite3.Connection):
            changes_at_begin = 0

            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                statement = sql.strip().upper()
                if statement.startswith("BEGIN"):
                    self.changes_at_begin = self.total_changes
                elif (
                    statement == "COMMIT"
                    and disk.full
                    and self.total_changes != self.changes_at_begin
                ):
                    with disk._lock:
                        disk.refused += 1
                    # The refused commit leaves the transaction open, as SQLite's may.
                    raise sqlite3.OperationalError("database or disk is full")
                return super().execute(sql, *args)

        return FillingConnection

"""What differs between SQLite and PostgreSQL for the stores' statements, in one place.

Statements name their parameters (``{p.id}`` in a query module's f-string renders as
``:id`` for ``sqlite3`` and ``%(id)s`` for psycopg) and are executed with a mapping, so
no statement is ever rewritten for a driver after it is written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class Params:
    """``params.name`` is the dialect's marker for the parameter ``name``."""

    def __init__(self, marker: str) -> None:
        self._marker = marker

    def __getattr__(self, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise AttributeError(name)
        return self._marker.format(name)


@dataclass(frozen=True, slots=True)
class Dialect:
    """One engine's spelling of what the stores' statements need."""

    name: Literal["sqlite", "postgresql"]
    marker: str  # a named parameter, ``{}`` standing for its name
    json: str  # column type of a JSON document
    moment: str  # column type of a point in time
    real: str  # column type of a float
    row_id: str  # an integer key the engine numbers in insertion order
    table_options: str  # appended to CREATE TABLE (...)
    lock_row: str  # appended to a SELECT whose row the transaction will update

    @property
    def p(self) -> Params:
        return Params(self.marker)

    def among(self, column: str, name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
        """``column`` is one of ``values``: the condition and its parameters (SQLite has
        no array parameter: one marker per value; PostgreSQL takes the list whole)."""
        if self.name == "postgresql":
            return f"{column} = ANY({self.marker.format(name)})", {name: list(values)}
        names = [f"{name}_{n}" for n in range(len(values))]
        marks = ", ".join(self.marker.format(n) for n in names)
        return f"{column} IN ({marks})", dict(zip(names, values, strict=True))


SQLITE = Dialect(
    name="sqlite",
    marker=":{}",
    json="TEXT",
    moment="TEXT",  # fixed-width UTC text, which compares as time does
    real="REAL",
    row_id="INTEGER PRIMARY KEY",  # the rowid itself
    table_options=" STRICT",
    lock_row="",  # BEGIN IMMEDIATE already holds the whole file
)
POSTGRES = Dialect(
    name="postgresql",
    marker="%({})s",
    json="jsonb",
    moment="timestamptz",
    real="DOUBLE PRECISION",
    row_id="bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    table_options="",
    lock_row=" FOR UPDATE SKIP LOCKED",
)


class SqlSession:
    """Statements on one DB-API connection inside its transaction (``sqlite3`` or
    psycopg alike): ``rows`` runs one and returns what it returns, ``many`` runs one per
    mapping of parameters. Errors are the driver's; the store around turns them into
    :class:`~ragwright.errors.StorageError`."""

    def __init__(self, connection: Any) -> None:
        self._db = connection

    def rows(
        self, statement: str, params: Mapping[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        # Both drivers' connections have ``execute`` (a cursor of its own, as before).
        cursor = (
            self._db.execute(statement) if params is None else self._db.execute(statement, params)
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall() if cursor.description is not None else []
        return rows

    def many(self, statement: str, params: Iterable[Mapping[str, Any]]) -> None:
        rows = list(params)
        if rows:
            with contextlib.closing(self._db.cursor()) as cursor:
                cursor.executemany(statement, rows)

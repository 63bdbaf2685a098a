"""The PostgreSQL the stores' tests run against: one fresh schema per test, dropped after.

``RAGWRIGHT_TEST_POSTGRES_URL`` names the server (default: the machine's loopback
PostgreSQL, trust authentication). It is read when this module is imported, before the
suite's autouse fixture clears ``RAGWRIGHT_*`` variables. An unreachable server fails
the tests that need it, never skips them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

POSTGRES_URL = os.environ.get(
    "RAGWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no other test uses; the schema (if created) is dropped on exit."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    try:
        yield name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
            db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

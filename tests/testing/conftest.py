from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from ragwright.adapters.redis import connect

REDIS_URL = os.environ.get("RAGWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    """The loopback Redis (``.ci/run`` starts it); fails, never skips, when it is down."""
    client = connect(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}; .ci/run starts it")
    yield client
    client.close()

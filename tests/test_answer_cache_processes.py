"""Issue 9, section 3: an answer that failed validation is never cached across processes.

Two separate ``ragwright ask`` processes share a Redis response cache. The scripted
OpenAI-compatible endpoint breaks the answer contract the first time; the second
process must call the provider again (counted at the endpoint), and a third, after a
valid answer was stored, must not.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.cli import ragwright, ragwright_process
from tests.conftest import SAMPLES
from tests.scripted_openai import scripted_openai

# A database no other test uses, so the keys this test adds can be told apart and removed.
REDIS_URL = "redis://127.0.0.1:6379/11"
QUESTION = "Should I drain all queued work during shutdown?"
# reason -> (the endpoint's first reply, what the failing process says). The OpenAI
# adapter already refuses a non-JSON reply to a schema request (invalid_output); the
# answer contract refuses the invented label.
BROKEN = {
    "not_json": ("Sure! The answer is APPROVED.", "response is not JSON"),
    "unknown_source_id": (
        json.dumps(
            {"status": "answered", "answer": "Drain within the deadline.", "sourceIds": ["S99"]}
        ),
        "unknown_source_id",
    ),
}


@pytest.fixture(scope="module")
def indexed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    ragwright("ingest", str(SAMPLES / "worker-shutdown.md"), home=home, check=True)
    return home


@pytest.fixture
def redis_db() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}")
    before = set(client.scan_iter())
    yield client
    added = set(client.scan_iter()) - before
    if added:
        client.delete(*added)
    client.close()


@pytest.mark.slow
@pytest.mark.parametrize("reason", sorted(BROKEN))
def test_a_rejected_answer_is_not_replayed_to_the_next_process(
    indexed_home: Path, redis_db: redis.Redis, reason: str
) -> None:
    broken, message = BROKEN[reason]
    replies = [broken]

    def reply(evidence: list[dict[str, Any]]) -> dict[str, Any] | str:
        if replies:
            return replies.pop()
        drain = next(e for e in evidence if "deadline allows" in e["text"])
        sentence = next(s for s in drain["text"].split(". ") if "deadline allows" in s)
        return {"status": "answered", "answer": sentence + ".", "sourceIds": [drain["id"]]}

    env = {
        "RAGWRIGHT_REDIS_URL": REDIS_URL,
        "RAGWRIGHT_CHAT_PROVIDER": "openai",
        # A model name of its own makes this test's cache keys unique.
        "RAGWRIGHT_CHAT_MODEL": f"scripted-{uuid.uuid4().hex}",
        "RAGWRIGHT_CHAT_RETRIES": "1",
        "RAGWRIGHT_CHAT_MAX_ATTEMPTS": "1",
    }
    with scripted_openai(reply) as (base_url, requests):
        env["RAGWRIGHT_CHAT_BASE_URL"] = base_url
        first = ragwright_process("ask", QUESTION, "--json", home=indexed_home, **env)
        assert first.returncode == 1 and message in first.stderr
        assert len(requests) == 1
        second = ragwright_process("ask", QUESTION, "--json", home=indexed_home, check=True, **env)
        assert len(requests) == 2  # the broken answer was not served from Redis
        assert json.loads(second.stdout)["status"] == "answered"
        third = ragwright_process("ask", QUESTION, "--json", home=indexed_home, check=True, **env)
        assert len(requests) == 2  # the valid answer was: the cache is really shared
        assert json.loads(third.stdout)["answer"] == json.loads(second.stdout)["answer"]

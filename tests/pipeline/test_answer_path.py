"""The answer use case over a chat pipeline: cache acceptance and provenance, failover
re-preparation, history, current revisions, the recorded request and its JSON form."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ragwright.adapters.lexical import Bm25Encoder
from ragwright.adapters.redis import RedisCacheStore
from ragwright.chat.cache import CacheStore, MemoryCacheStore, ResponseCache
from ragwright.chat.contract import ChatMessage, ChatModel, ModelProfile
from ragwright.chat.failover import Failover
from ragwright.core.assembly import assemble
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.points import ChunkPayload
from ragwright.errors import AnswerContractError, AssemblyError, ChatError, FailureCategory
from ragwright.pipeline.answer import (
    AnswerPlan,
    AnswerResult,
    Budget,
    answer_question,
    candidates_from,
)
from ragwright.pipeline.retrieve import Hit, Retriever
from ragwright.testing.fakes import HashingEmbedder
from ragwright.testing.scripted import Fail, Reply, ScriptedChatModel
from ragwright.types import ChunkingPolicy, ParagraphPositions
from tests.pipeline.indexes import hashing_index

POLICY = ChunkingPolicy()
ELIGIBLE = Eligibility(POLICY.version)
QUESTION = "Should I drain all queued work during shutdown?"
REDIS_URL = os.environ.get("RAGWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
PRIMARY = ModelProfile("primary", "local", "big-model", 4096, 512, "variants")
# A smaller window and a hosted strict mode: fewer sources, the object schema.
ALTERNATE = ModelProfile("alternate", "openai", "small-model", 760, 256, "object")


class Words:
    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


# Supported by the shutdown runbook's drain paragraph, which every label here cites.
SUPPORTED = "Drain the remaining jobs only while the shutdown deadline allows it."


def answered(*labels: str) -> str:
    return json.dumps({"status": "answered", "answer": SUPPORTED, "sourceIds": labels})


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    with hashing_index(tmp_path_factory.mktemp("answer-path") / "i") as index:
        yield Retriever(index, HashingEmbedder(), Bm25Encoder())


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[CacheStore]:
    if request.param == "memory":
        yield MemoryCacheStore()
        return
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}; .ci/run starts it")
    yield RedisCacheStore(client, prefix=f"test:{uuid.uuid4().hex}:")
    client.close()


def ask(retriever: Retriever, chat: ChatModel | None, **kwargs: Any) -> AnswerResult:
    return asyncio.run(
        answer_question(
            AnswerPlan(
                QUESTION,
                retriever=retriever,
                eligibility=ELIGIBLE,
                scope=CallerScope(),
                chat=chat,
                counter=Words(),
                **kwargs,
            )
        )
    )


def failover(primary: ScriptedChatModel, alternate: ScriptedChatModel) -> Failover:
    return Failover([primary, alternate], profiles=[PRIMARY, ALTERNATE])


# --- 1. the cache stores only accepted answers and keeps provenance ----------------------


def test_a_rejected_answer_is_not_cached_so_the_next_ask_calls_the_provider(
    retriever: Retriever, store: CacheStore
) -> None:
    provider = ScriptedChatModel([Reply(answered("S99")), Reply(answered("S1"))])
    chat = ResponseCache(provider, store, ttl=60)
    with pytest.raises(AnswerContractError):
        ask(retriever, chat)
    result = ask(retriever, chat)
    assert provider.calls == 2 and result.status == "answered"
    again = ask(retriever, chat)  # the accepted answer is cached
    assert provider.calls == 2 and again.answer == result.answer


def test_a_cached_fallback_answer_keeps_its_provider_and_its_context(
    retriever: Retriever, store: CacheStore
) -> None:
    primary = ScriptedChatModel([Fail()], name="primary")
    alternate = ScriptedChatModel([Reply(answered("S2"))], name="alternate", model="small-v2")
    chat = ResponseCache(failover(primary, alternate), store, ttl=60)
    first = ask(retriever, chat, fallbacks=[ALTERNATE])
    hit = ask(retriever, chat, fallbacks=[ALTERNATE])
    assert (primary.calls, alternate.calls) == (1, 1)  # the second ask was a cache hit
    assert (hit.provider, hit.model, hit.fallback) == ("alternate", "small-v2", True)
    assert hit.context == first.context and hit.citations == first.citations


# --- 2. failover re-prepares the request for the alternate ------------------------------


def test_the_alternate_gets_a_request_prepared_for_its_own_profile(retriever: Retriever) -> None:
    primary = ScriptedChatModel([Fail(FailureCategory.TRANSIENT)], name="primary")
    alternate = ScriptedChatModel([Reply(answered("S1"))], name="alternate", model="small-v2")
    result = ask(retriever, failover(primary, alternate), fallbacks=[ALTERNATE])
    (sent_primary,), (sent_alternate,) = primary.requests, alternate.requests
    primary_schema = sent_primary.options.json_schema
    alternate_schema = sent_alternate.options.json_schema
    assert primary_schema is not None and "anyOf" in primary_schema  # variants
    assert alternate_schema is not None and alternate_schema["type"] == "object"
    assert sent_alternate.options.max_output_tokens == ALTERNATE.output_limit
    primary_labels = json.loads(sent_primary.messages[1].content)["evidence"]
    alternate_labels = json.loads(sent_alternate.messages[1].content)["evidence"]
    assert 0 < len(alternate_labels) < len(primary_labels)  # the smaller window
    assert (result.provider, result.model, result.fallback) == ("alternate", "small-v2", True)
    # Citations and the recorded request are the alternate's, not the primary's.
    assert result.request is not None and result.request.messages == sent_alternate.messages
    assert len(result.context.sources) == len(alternate_labels)
    assert result.citations[0].chunk_id == result.context.sources[0].candidate.chunk_id
    assert result.options is not None and result.options.schema_style == "object"


def test_an_alternate_counts_tokens_with_its_ratio(retriever: Retriever) -> None:
    def sources_sent(ratio: float) -> int:
        primary = ScriptedChatModel([Fail()], name="primary")
        alternate = ScriptedChatModel([Reply(answered("S1"))], name="alternate")
        profile = ModelProfile("alternate", "openai", "m", 900, 256, "object", token_ratio=ratio)
        chat = Failover([primary, alternate], profiles=[PRIMARY, profile])
        return len(ask(retriever, chat, fallbacks=[profile]).context.sources)

    assert sources_sent(1.5) < sources_sent(1.0)


def test_an_alternate_the_request_cannot_fit_is_skipped(retriever: Retriever) -> None:
    events: list[str] = []
    primary = ScriptedChatModel([Fail()], name="primary")
    alternate = ScriptedChatModel([], name="alternate")
    tiny = ModelProfile("alternate", "openai", "tiny", 300, 256, "object")
    chat = Failover([primary, alternate], profiles=[PRIMARY, tiny], events=events.append)
    result = ask(retriever, chat, fallbacks=[tiny])
    # No model could answer: the result degrades to evidence only, never an answer.
    assert result.status == "evidence_only" and result.degraded == "transient"
    assert result.answer == "" and result.quotes and alternate.calls == 0
    assert "failover:unfit:alternate" in events


def test_an_invalid_configuration_does_not_switch(retriever: Retriever) -> None:
    primary = ScriptedChatModel([Fail(FailureCategory.INVALID_CONFIGURATION)], name="primary")
    alternate = ScriptedChatModel([Reply(answered("S1"))], name="alternate")
    with pytest.raises(ChatError) as caught:
        ask(retriever, failover(primary, alternate), fallbacks=[ALTERNATE])
    assert caught.value.category is FailureCategory.INVALID_CONFIGURATION
    assert alternate.calls == 0


# --- 3. history and current revisions change what is assembled ---------------------------

HISTORY = [
    ChatMessage("user", "How long is the shutdown deadline?"),
    ChatMessage("assistant", "Thirty seconds."),
]


def test_history_reaches_the_assembled_message(retriever: Retriever) -> None:
    policy = "seed-baseline+history=0.25"
    without = ask(retriever, None, preview=True, policy=policy)
    with_history = ask(retriever, None, preview=True, policy=policy, history=HISTORY)
    assert "history" not in json.loads(without.context.user_message)
    assert json.loads(with_history.context.user_message)["history"] == [
        {"question": "How long is the shutdown deadline?", "answer": "Thirty seconds."}
    ]
    assert with_history.context.history_turns == 1
    assert with_history.context.input_tokens > without.context.input_tokens


def test_history_under_a_policy_without_a_share_is_recorded_as_dropped(
    retriever: Retriever,
) -> None:
    result = ask(retriever, None, preview=True, history=HISTORY)
    assert (result.context.history_turns, result.context.history_dropped) == (0, 1)
    assert result.to_dict()["history"] == {"included": 0, "dropped": 1}


@pytest.mark.parametrize(
    ("history", "field"),
    [
        ([ChatMessage("assistant", "Hi."), ChatMessage("user", "Hi?")], "history[0].role"),
        ([ChatMessage("user", "Only a question?")], "history[0]"),
        ([ChatMessage("system", "Obey."), ChatMessage("assistant", "Ok.")], "history[0].role"),
    ],
)
def test_malformed_history_names_the_message(
    retriever: Retriever, history: list[ChatMessage], field: str
) -> None:
    with pytest.raises(AssemblyError) as caught:
        ask(retriever, None, preview=True, history=history)
    assert caught.value.reason.startswith(field)


def payload(chunk_id: str, revision: str) -> ChunkPayload:
    return ChunkPayload(
        point_id=uuid.uuid4(),
        document_id="worker-shutdown",
        chunk_id=chunk_id,
        chunk_point_id=chunk_id,
        chunking_version="v1",
        section_id="s",
        title="Worker shutdown",
        heading="Shutdown",
        text=f"Shutdown\n\nDrain within the deadline ({revision}).",
        document_type="runbook",
        publication_state="published",
        revision=revision,
        content_hash=f"h-{chunk_id}",
        index_state="live",
        document_digest="d",
        positions=ParagraphPositions(0, (0,)),
        tenant=None,
        source_uri=None,
    )


def test_the_stored_revision_lets_the_current_one_win() -> None:
    hits = [Hit(payload("s/p0-old", "r1"), 0.9), Hit(payload("s/p0", "r2"), 0.8)]
    candidates = candidates_from(hits)
    assert [c.revision for c in candidates] == ["r1", "r2"]
    context = assemble(
        candidates,
        QUESTION,
        counter=Words(),
        max_input_tokens=500,
        policy="seed-baseline+prefer-current-revision",
        current_revisions={"worker-shutdown": "r2"},
    )
    assert [d.outcome for d in context.decisions] == ["stale_revision", "admitted"]
    assert [s.candidate.chunk_id for s in context.sources] == ["s/p0"]


SHUT = "worker-shutdown"


def test_current_revisions_drop_evidence_from_an_outdated_index(retriever: Retriever) -> None:
    policy = "seed-baseline+prefer-current-revision"
    indexed = ask(retriever, None, preview=True)
    revision = indexed.context.sources[0].candidate.revision
    assert revision is not None and revision.startswith("sha256:")
    current = ask(retriever, None, preview=True, policy=policy, current_revisions={SHUT: revision})
    newer = ask(retriever, None, preview=True, policy=policy, current_revisions={SHUT: "r9"})
    shutdown = [s for s in current.context.sources if s.candidate.document_id == SHUT]
    assert shutdown and all(s.candidate.document_id != SHUT for s in newer.context.sources)
    assert "stale_revision" in {d.outcome for d in newer.context.decisions}


def test_prefer_current_revision_without_revisions_is_refused(retriever: Retriever) -> None:
    with pytest.raises(AssemblyError, match="current_revisions"):
        ask(retriever, None, preview=True, policy="seed-baseline+prefer-current-revision")


# --- 4. the exact request and the JSON form ---------------------------------------------


def test_a_preview_holds_the_exact_messages_the_model_would_receive(
    retriever: Retriever,
) -> None:
    preview = ask(retriever, None, preview=True)
    provider = ScriptedChatModel([Reply(answered("S1"))])
    sent = ask(retriever, provider)
    (request,) = provider.requests
    assert preview.request is not None
    assert preview.request.messages == request.messages
    assert preview.request.options == request.options
    roles = [m["role"] for m in preview.to_dict()["request"]["messages"]]
    assert roles == ["system", "user"]
    assert preview.to_dict()["request"]["messages"][0]["content"] == sent.context.instructions


def test_the_json_form_is_stable(retriever: Retriever) -> None:
    primary = ScriptedChatModel([Fail()], name="primary")
    alternate = ScriptedChatModel([Reply(answered("S1"))], name="alternate", model="small-v2")
    out = ask(
        retriever, failover(primary, alternate), fallbacks=[ALTERNATE], budget=Budget(4096, 512)
    ).to_dict()
    assert list(out) == [
        "status",
        "style",
        "answer",
        "withheld_answer",
        "quotes",
        "answerability",
        "degraded",
        "citations",
        "sources",
        "decisions",
        "policy",
        "input_tokens",
        "history",
        "request",
        "usage",
        "provider",
        "model",
        "fallback",
        "support",
        "options",
        "timings",
    ]
    assert set(out["timings"]) == {"retrieve", "assemble", "generate", "validate"}
    assert all(ms >= 0 for ms in out["timings"].values())
    assert (out["provider"], out["model"], out["fallback"]) == ("alternate", "small-v2", True)
    citation = out["citations"][0]
    assert set(citation) == {
        "label",
        "document_id",
        "chunk_id",
        "chunking_version",
        "revision",
        "source_uri",
        "pages",
        "location",
    }
    assert out["options"]["budget"]["window"] == ALTERNATE.context_window
    assert out["request"]["options"]["json_schema"]["type"] == "object"
    json.dumps(out)  # JSON-serialisable as it stands

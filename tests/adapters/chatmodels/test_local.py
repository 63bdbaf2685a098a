from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.chatmodels.local import (
    LocalChatModel,
    LocalModelServer,
    OnDemandLocalModel,
    assemble_model,
)
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, ChatResponse, Deadline
from ragwright.core.answers import answer_schema
from ragwright.errors import ArtifactMismatch, ChatError, FailureCategory
from ragwright.stages import listening


def fake_parts(tmp_path: Path) -> tuple[list[Path], str]:
    parts = []
    for i, content in enumerate((b"GGUF", b"-weights-", b"end")):
        part = tmp_path / f"part{i}.bin"
        part.write_bytes(content)
        parts.append(part)
    return parts, hashlib.sha256(b"GGUF-weights-end").hexdigest()


def test_assembly_verifies_and_is_done_once(tmp_path: Path) -> None:
    parts, digest = fake_parts(tmp_path)
    model = assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    assert model.read_bytes() == b"GGUF-weights-end"
    for part in parts:
        part.unlink()  # a second call must not need them
    assert assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest) == model


def test_a_corrupted_part_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    parts, digest = fake_parts(tmp_path)
    parts[1].write_bytes(b"-tampered-")
    with pytest.raises(ArtifactMismatch):
        assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    assert list((tmp_path / "cache").iterdir()) == []


def verified_earlier(model: Path) -> Path:
    """Date the marker a second back, as if the file had been verified on an earlier run
    (an overwrite in the same clock tick as the assembly would not be newer)."""
    marker = model.with_suffix(".verified")
    stamp = model.stat().st_mtime_ns - 10**9
    os.utime(marker, ns=(stamp, stamp))
    return marker


def test_a_model_overwritten_in_place_is_reverified_and_assembled_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parts, digest = fake_parts(tmp_path)
    model = assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    verified_earlier(model)
    model.write_bytes(b"GGUF-tampered!!!")  # same size, so the marker's size still matches
    assert model.stat().st_size == len(b"GGUF-weights-end")
    with caplog.at_level(logging.WARNING, logger="ragwright.adapters.chatmodels.local"):
        again = assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    assert again.read_bytes() == b"GGUF-weights-end"
    [warning] = caplog.messages
    assert "changed after it was verified" in warning
    assert hashlib.sha256(b"GGUF-tampered!!!").hexdigest() in warning


def test_an_overwritten_model_whose_parts_are_gone_is_refused(tmp_path: Path) -> None:
    parts, digest = fake_parts(tmp_path)
    model = assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    parts[0].write_bytes(b"XXXX")
    verified_earlier(model)
    model.write_bytes(b"GGUF-tampered!!!")
    with pytest.raises(ArtifactMismatch) as raised:
        assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    assert raised.value.expected == digest


def test_a_touched_but_intact_model_is_hashed_once_then_trusted(tmp_path: Path) -> None:
    parts, digest = fake_parts(tmp_path)
    model = assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest)
    marker = verified_earlier(model)  # as after a copy or a touch of the file
    for part in parts:
        part.unlink()  # intact bytes: no re-assembly needed
    assert assemble_model(tmp_path / "cache", parts=parts, expected_sha256=digest) == model
    assert marker.stat().st_mtime_ns >= model.stat().st_mtime_ns


SCHEMA = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["answered", "insufficient"]},
        "answer": {"type": "string", "maxLength": 60},
    },
    "required": ["status", "answer"],
    "additionalProperties": False,
}
# A bound on waiting for the model on a busy machine, not a speed claim.
WAIT_S = 600

REQUEST = ChatRequest(
    (
        ChatMessage("system", "Answer from the evidence only, as JSON."),
        ChatMessage(
            "user",
            "Evidence: Refunds take five to ten business days. Question: How long do refunds take?",
        ),
    ),
    # Greedy and bounded: the answer cannot outgrow the output limit, so the JSON closes.
    ChatOptions(max_output_tokens=200, temperature=0.0, json_schema=SCHEMA),
)


def test_the_on_demand_model_assembles_nothing_until_the_first_call(tmp_path: Path) -> None:
    parts, digest = fake_parts(tmp_path)
    parts[0].write_bytes(b"XXXX")  # a wrong part: assembly fails, but only when called
    model = OnDemandLocalModel(tmp_path / "cache", parts=parts, expected_sha256=digest)
    asyncio.run(model.close())  # closing a model that never started is fine
    assert not model.started and not (tmp_path / "cache").exists()
    with pytest.raises(ArtifactMismatch):
        asyncio.run(model.complete(REQUEST, Deadline.after(5)))
    assert not model.started


@pytest.mark.slow
def test_the_on_demand_model_starts_on_the_first_call_and_stops(tmp_path: Path) -> None:
    model = OnDemandLocalModel(tmp_path / "cache", context_tokens=1024)
    assert not model.started

    async def go() -> ChatResponse:
        try:
            response = await model.complete(REQUEST, Deadline.after(WAIT_S))
            assert model.started
            return response
        finally:
            await model.close()

    seen: list[str] = []
    with listening(seen.append):  # what `ask` shows on a terminal while it waits
        assert json.loads(asyncio.run(go()).text)
    assert seen == ["start-model", "generate"]
    assert not model.started
    model.stop()  # idempotent


@pytest.mark.slow
# Misuse on purpose: the first loop's socket dies unclosed, which Python reports.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_closing_under_another_event_loop_still_stops_the_server(tmp_path: Path) -> None:
    model = OnDemandLocalModel(tmp_path / "cache", context_tokens=1024)
    asyncio.run(model.complete(REQUEST, Deadline.after(WAIT_S)))
    assert model.started
    asyncio.run(model.close())
    assert not model.started
    gc.collect()  # let the dead loop's socket be reported here, not in a later test


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    model = assemble_model(tmp_path_factory.mktemp("models"))
    with LocalModelServer(model, context_tokens=2048) as running:
        yield running


def complete(server: LocalModelServer, request: ChatRequest) -> ChatResponse:
    async def go() -> ChatResponse:
        model = LocalChatModel(server)
        try:
            return await model.complete(request, Deadline.after(WAIT_S))
        finally:
            await model.close()

    return asyncio.run(go())


@pytest.mark.slow
def test_the_real_local_model_answers_schema_constrained_json(server: LocalModelServer) -> None:
    response = complete(server, REQUEST)
    answer = json.loads(response.text)
    assert answer["status"] in ("answered", "insufficient") and isinstance(answer["answer"], str)
    assert response.usage is not None and response.usage.input_tokens > 10
    assert response.provider == "local" and response.model


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 1.5])
def test_the_variants_schema_binds_the_real_model_to_the_issued_labels(
    server: LocalModelServer, temperature: float
) -> None:
    """The grammar llama.cpp compiles from the answer schema leaves no room for invented
    labels or inconsistent statuses, even when the prompt asks for them and sampling is hot."""
    labels = ["S1", "S2"]
    request = ChatRequest(
        (
            ChatMessage("system", "Return JSON with status, answer and sourceIds."),
            ChatMessage(
                "user",
                "Evidence S1: Refunds take five to ten business days. "
                "Evidence S2: Refunds go to the original card. "
                "Cite sources S7 and S9 only, and say the status is 'maybe'. "
                "Question: How long do refunds take?",
            ),
        ),
        ChatOptions(
            # Hot sampling may pick short or escaped tokens: 50 characters take at most 6
            # tokens each (\uXXXX), and llama.cpp's JSON grammar bounds whitespace (about
            # 21 characters at each of ~12 places), so 700 tokens always close the JSON.
            max_output_tokens=700,
            temperature=temperature,
            json_schema=answer_schema(labels, style="variants", max_answer_chars=50),
        ),
    )
    answer = json.loads(complete(server, request).text)
    assert set(answer) == {"status", "answer", "sourceIds"}
    if answer["status"] == "answered":
        assert answer["answer"] and answer["sourceIds"]
        assert set(answer["sourceIds"]) <= set(labels)
    else:
        assert answer == {"status": "insufficient", "answer": "", "sourceIds": []}


@pytest.mark.slow
def test_the_variants_schema_keeps_an_insufficient_answer_empty(server: LocalModelServer) -> None:
    """Asked outright for an insufficient answer with text and a citation, the grammar
    still yields the one consistent shape."""
    request = ChatRequest(
        (
            ChatMessage(
                "user",
                'Return {"status": "insufficient", "answer": "I do not know", '
                '"sourceIds": ["S1"]} exactly.',
            ),
        ),
        ChatOptions(
            max_output_tokens=100, temperature=0.0, json_schema=answer_schema(["S1", "S2"])
        ),
    )
    assert json.loads(complete(server, request).text) == {
        "status": "insufficient",
        "answer": "",
        "sourceIds": [],
    }


@pytest.mark.slow
def test_the_local_model_streams_and_refuses_unconstrained_requests(
    server: LocalModelServer,
) -> None:
    async def go() -> str:
        model = LocalChatModel(server)
        try:
            with pytest.raises(ChatError) as caught:
                await model.complete(ChatRequest(REQUEST.messages), Deadline.after(5))
            assert caught.value.category is FailureCategory.UNSUPPORTED_OPTION
            return "".join([u.text async for u in model.stream(REQUEST, Deadline.after(WAIT_S))])
        finally:
            await model.close()

    json.loads(asyncio.run(go()))


@pytest.mark.slow
def test_a_stopped_server_is_a_transient_failure(tmp_path_factory: pytest.TempPathFactory) -> None:
    model_path = assemble_model(tmp_path_factory.mktemp("models2"))
    server = LocalModelServer(model_path, context_tokens=512)
    client = LocalChatModel(server)
    server.close()

    async def go() -> None:
        try:
            await client.complete(REQUEST, Deadline.after(5))
        finally:
            await client.close()

    with pytest.raises(ChatError) as caught:
        asyncio.run(go())
    assert caught.value.category is FailureCategory.TRANSIENT


def _started_params(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kwargs: Any) -> Any:
    """The llama.cpp parameters ``LocalModelServer(**kwargs)`` starts its server with
    (the server itself is replaced by one that records them)."""
    import xllamacpp

    started: list[object] = []

    class RecordingServer:
        listening_address = "http://127.0.0.1:1"

        def __init__(self, params: object) -> None:
            started.append(params)

    monkeypatch.setattr(xllamacpp, "Server", RecordingServer)
    LocalModelServer(tmp_path / "model.gguf", **kwargs).close()
    (params,) = started
    return params


def test_the_server_keeps_no_host_memory_cache_of_earlier_prompts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # llama.cpp's default keeps earlier prompts' states in up to 8 GiB of host memory: a
    # serving process grew 4-5 MiB an answer (benchmarks/soak.py, 981 -> 1,795 MiB over
    # 100 answers). The server is started with that cache off; the slot's own prefix
    # reuse is untouched (its cache_prompt stays as llama.cpp sets it).
    params = _started_params(monkeypatch, tmp_path)
    assert params.cache_ram_mib == 0
    assert params.cache_prompt is True
    assert params.n_parallel == 1


@pytest.mark.parametrize("threads", [None, 1, 3])
def test_the_server_computes_with_the_threads_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, threads: int | None
) -> None:
    import xllamacpp

    defaults = xllamacpp.CommonParams()
    params = _started_params(monkeypatch, tmp_path, threads=threads)
    for group in ("cpuparams", "cpuparams_batch"):  # writing tokens, reading the prompt
        wanted = getattr(defaults, group).n_threads if threads is None else threads
        assert getattr(params, group).n_threads == wanted, group


def test_each_start_requires_a_key_of_its_own_and_serves_no_slots_or_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Any user of the machine can reach the loopback port: without the key llama.cpp
    # answers 401 (test_cli_model.py runs that as another uid against the real server).
    import xllamacpp

    started: list[Any] = []

    class RecordingServer:
        listening_address = "http://127.0.0.1:1"

        def __init__(self, params: object) -> None:
            started.append(params)

    monkeypatch.setattr(xllamacpp, "Server", RecordingServer)
    first = LocalModelServer(tmp_path / "model.gguf")
    second = LocalModelServer(tmp_path / "model.gguf")
    assert [params.api_keys for params in started] == [[first.api_key], [second.api_key]]
    assert first.api_key != second.api_key and len(first.api_key) >= 40
    assert [(params.endpoint_slots, params.ui) for params in started] == [(False, False)] * 2

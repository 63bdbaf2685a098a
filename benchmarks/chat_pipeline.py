"""Chat pipeline overhead and the embedded local model's speed.

1. **overhead** — the default pipeline (guard, budget, call telemetry and probe, cache
   miss path, retry, capacity gate, attempt probe and telemetry) around a zero-latency
   provider, against the bare provider in the same run; per-call p50/p95 in
   milliseconds. The cache is bypassed (no scope) so every call walks every layer.
2. **local model** — assembly (cached after the first run), server start, first-token
   latency of a streamed schema-constrained answer, and generated tokens per second.

Writes ``benchmarks/results/chat_pipeline.json``. Target: overhead p50 <= 0.2 ms.

    python benchmarks/chat_pipeline.py [--calls 2000] [--skip-local]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ragwright.adapters.chatmodels.local import LocalChatModel, LocalModelServer, assemble_model
from ragwright.adapters.tokenizer import O200kCounter
from ragwright.chat.contract import (
    ChatMessage,
    ChatModel,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    Deadline,
)
from ragwright.runtime import build_chat_pipeline
from ragwright.settings import load_settings

REQUEST = ChatRequest(
    (
        ChatMessage("system", "Answer only from the evidence. Reply as JSON."),
        ChatMessage(
            "user",
            "Evidence: Refunds take five to ten business days. Question: How long do refunds take?",
        ),
    ),
    ChatOptions(
        max_output_tokens=64,
        json_schema={
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["answered", "insufficient"]},
                "answer": {"type": "string"},
            },
            "required": ["status", "answer"],
            "additionalProperties": False,
        },
    ),
)
RESPONSE = ChatResponse('{"status": "answered", "answer": "5-10 days"}', "stop", "instant")


class Instant:
    """A provider that answers at once."""

    name = "instant"

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        return RESPONSE

    async def stream(self, request: ChatRequest, deadline: Deadline):  # type: ignore[no-untyped-def]
        yield ChatUpdate(RESPONSE.text)


async def timed_calls(model: ChatModel, calls: int) -> list[float]:
    durations = []
    for _ in range(calls):
        started = time.perf_counter()
        await model.complete(REQUEST, Deadline.after(10))
        durations.append((time.perf_counter() - started) * 1000)
    return durations


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 4),
        "p95": round(ordered[int(0.95 * len(ordered))], 4),
    }


def overhead(calls: int) -> dict[str, object]:
    counter = O200kCounter()
    pipeline = build_chat_pipeline(load_settings(), [Instant()], counter=counter)
    bare = Instant()

    async def run() -> tuple[list[float], list[float]]:
        await timed_calls(pipeline, 200)  # warm-up
        piped, plain = [], []
        for _ in range(5):  # interleave so drift hits both alike
            piped += await timed_calls(pipeline, calls // 5)
            plain += await timed_calls(bare, calls // 5)
        return piped, plain

    piped, plain = asyncio.run(run())
    p50 = statistics.median(piped) - statistics.median(plain)
    return {
        "calls": calls,
        "pipeline_ms": summary(piped),
        "bare_provider_ms": summary(plain),
        "overhead_p50_ms": round(p50, 4),
    }


def local_model(home: Path) -> dict[str, object]:
    started = time.perf_counter()
    model_path = assemble_model(home / "models")
    assembly = time.perf_counter() - started
    started = time.perf_counter()
    server = LocalModelServer(model_path, context_tokens=2048)
    start = time.perf_counter() - started
    client = LocalChatModel(server)

    async def measure() -> dict[str, float]:
        first = None
        chunks = 0
        started = time.perf_counter()
        async for _ in client.stream(REQUEST, Deadline.after(120)):
            chunks += 1
            if first is None:
                first = time.perf_counter() - started
        streamed = time.perf_counter() - started
        started = time.perf_counter()
        response = await client.complete(REQUEST, Deadline.after(120))
        buffered = time.perf_counter() - started
        generated = response.usage.output_tokens if response.usage else 0
        await client.close()
        return {
            "first_token_s": round(first or 0.0, 3),
            "stream_total_s": round(streamed, 3),
            "stream_chunks": chunks,
            "buffered_call_s": round(buffered, 3),
            "generated_tokens": generated,
            "generated_tokens_per_s": round(generated / buffered, 1) if buffered else 0.0,
        }

    figures = asyncio.run(measure())
    server.close()
    return {"assembly_s": round(assembly, 2), "server_start_s": round(start, 2), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("RAGWRIGHT_HOME", tempfile.mkdtemp()))
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "chat_pipeline.json"
    )
    args = parser.parse_args()
    record: dict[str, object] = {"cpus": os.cpu_count(), "overhead": overhead(args.calls)}
    print(json.dumps(record["overhead"], indent=2))
    if not args.skip_local:
        record["local_model"] = local_model(args.home)
        print(json.dumps(record["local_model"], indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

"""Context assembly: speed, evidence lost per policy, and ``ask`` latency by stage.

1. **speed** — ``assemble`` over 20 and 100 candidates with real o200k_base counting
   (p50/p95 ms). Target: <= 5 ms p50 for 20.
2. **evidence lost** — for the labelled sample set (``samples/eval/cases.jsonl``), the
   relevant chunks hybrid retrieval found in its top 5, and how many of them lost any
   paragraph on the way into the message, per policy, at the default allowance (3,328
   tokens) and two tight ones (350, 250).
3. **ask latency** — retrieve / assemble / generate / validate for three sample
   questions with the embedded local model.

Writes ``benchmarks/results/assembly.json``.

    python benchmarks/assembly.py [--skip-model]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from ragwright.adapters.chatmodels.local import LocalChatModel, LocalModelServer, assemble_model
from ragwright.adapters.datasets import load_cases
from ragwright.adapters.tokenizer import O200kCounter
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, Deadline
from ragwright.core.answers import answer_schema, parse_answer
from ragwright.core.assembly import Candidate, assemble
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.pipeline.answer import candidates_from
from ragwright.pipeline.retrieve import Retriever
from ragwright.types import ChunkingPolicy
from sample_index import sample_retriever

ROOT = Path(__file__).resolve().parents[1]
POLICY = ChunkingPolicy()
POLICIES = ("seed-baseline", "whole-or-marked-fragment", "seed-baseline+edges")
QUESTIONS = (
    "Should I drain all queued work during shutdown?",
    "When is it safe to promote the database replica?",
    "How long does a refund take to show up?",
)


def speed(counter: O200kCounter) -> dict[str, object]:
    paragraph = "Drain the remaining items only while the shutdown deadline allows it. " * 3
    out: dict[str, object] = {}
    for n in (20, 100):
        candidates = [
            Candidate(
                f"doc-{i % 7}",
                f"s/p{i}",
                POLICY.version,
                f"s{i % 3}",
                f"Runbook {i % 7}",
                "Steps",
                f"Steps\n\n{paragraph}{i}\n\nCheck item {i}.",
                1.0 - i / 1000,
            )
            for i in range(n)
        ]
        times = []
        for _ in range(60):
            started = time.perf_counter()
            assemble(candidates, QUESTIONS[0], counter=counter, max_input_tokens=3328)
            times.append((time.perf_counter() - started) * 1000)
        ordered = sorted(times)
        out[str(n)] = {
            "p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(0.95 * 59)], 3),
        }
    return out


def lost_evidence(retriever: Retriever, counter: O200kCounter) -> dict[str, object]:
    eligibility = Eligibility(POLICY.version, ("runbook", "note"), ("published",))
    cases = [c for c in load_cases(ROOT / "samples" / "eval" / "cases.jsonl") if not c.unsupported]
    result: dict[str, object] = {}
    for allowance in (3328, 350, 250):
        per_policy = {}
        for policy in POLICIES:
            found = lost = 0
            for case in cases:
                hits = retriever.search(case.question, eligibility, CallerScope(), k=5).hits
                relevant = {(k.document_id, k.chunk_id) for k in case.relevant}
                context = assemble(
                    candidates_from(hits),
                    case.question,
                    counter=counter,
                    max_input_tokens=allowance,
                    policy=policy,
                )
                sent = "\n\n".join(s.included_text for s in context.sources)
                for hit in hits:
                    if (hit.payload.document_id, hit.payload.chunk_id) not in relevant:
                        continue
                    found += 1
                    body = hit.payload.text.split("\n\n")[1:]
                    if any(p not in sent for p in body):
                        lost += 1
            per_policy[policy] = {
                "relevant_found": found,
                "lost": lost,
                "lost_rate": round(lost / found, 3) if found else None,
            }
        result[str(allowance)] = per_policy
    return result


def ask_latency(retriever: Retriever, counter: O200kCounter, home: Path) -> list[dict[str, object]]:
    server = LocalModelServer(assemble_model(home / "models"), context_tokens=4096)
    model = LocalChatModel(server)
    eligibility = Eligibility(POLICY.version, ("runbook", "note"), ("published",))
    rows = []

    async def one(question: str) -> dict[str, object]:
        started = time.perf_counter()
        hits = retriever.search(question, eligibility, CallerScope(), k=5).hits
        retrieved = time.perf_counter()
        context = assemble(candidates_from(hits), question, counter=counter, max_input_tokens=3328)
        assembled = time.perf_counter()
        request = ChatRequest(
            (
                ChatMessage("system", context.instructions),
                ChatMessage("user", context.user_message),
            ),
            ChatOptions(
                max_output_tokens=512,
                temperature=0.0,
                json_schema=answer_schema([s.label for s in context.sources]),
            ),
        )
        response = await model.complete(request, Deadline.after(120))
        generated = time.perf_counter()
        answer = parse_answer(response.text, context.sources)
        validated = time.perf_counter()
        return {
            "question": question,
            "status": answer.status,
            "retrieve_ms": round((retrieved - started) * 1000, 1),
            "assemble_ms": round((assembled - retrieved) * 1000, 2),
            "generate_s": round(generated - assembled, 2),
            "validate_ms": round((validated - generated) * 1000, 2),
            "input_tokens_o200k": context.input_tokens,
            "usage": [response.usage.input_tokens, response.usage.output_tokens]
            if response.usage
            else None,
        }

    async def all_questions() -> None:
        # One event loop for the whole run: the async HTTP client belongs to it.
        for question in QUESTIONS:
            rows.append(await one(question))
        await model.close()

    asyncio.run(all_questions())
    server.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--skip-model", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "assembly.json"
    )
    args = parser.parse_args()
    counter = O200kCounter()
    record: dict[str, object] = {"speed": speed(counter)}
    print(json.dumps(record["speed"]))
    home = Path(tempfile.mkdtemp(prefix="ragwright-assembly-"))
    with sample_retriever(home) as retriever:
        record["lost_evidence"] = lost_evidence(retriever, counter)
        print(json.dumps(record["lost_evidence"]))
        if not args.skip_model:
            record["ask_latency"] = ask_latency(retriever, counter, home)
            print(json.dumps(record["ask_latency"], indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

"""How often the local model's answers keep the answer contract, per schema style.

For every labelled sample question (``samples/eval/cases.jsonl``: 20 answerable, 5 with no
answer in the corpus) under two eligibilities (published runbooks; published notes),
retrieval and assembly run once, then the same assembled request goes to the embedded
local model under three arms, side by side in one run:

- ``baseline`` — the static contract schema (any string as a source id) at the provider's
  default temperature: how ``ask`` ran before per-request schemas;
- ``object`` — the per-request ``object`` schema (ids limited to issued labels), temperature 0;
- ``variants`` — the per-request ``variants`` schema (the local default), temperature 0.

Per arm: contract failures by reason, status counts; of the answerable calls whose context
held a labelled-relevant chunk, how many answered citing one; unsupported questions answered
anyway (false acceptance); answers the support check flags; generation time. Writes
``benchmarks/results/answer_contract.json``.

    python benchmarks/answer_contract.py [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ragwright.adapters.chatmodels.local import LocalChatModel, LocalModelServer, assemble_model
from ragwright.adapters.datasets import load_cases
from ragwright.adapters.tokenizer import O200kCounter
from ragwright.chat.contract import ChatMessage, ChatOptions, ChatRequest, Deadline
from ragwright.core.answers import ANSWER_SCHEMA, answer_schema, parse_answer
from ragwright.core.assembly import AssembledContext, assemble
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.core.support import check_support
from ragwright.errors import AnswerContractError, ChatError
from ragwright.pipeline.answer import Budget, candidates_from
from ragwright.types import ChunkingPolicy
from sample_index import sample_retriever

ROOT = Path(__file__).resolve().parents[1]
POLICY = ChunkingPolicy()
BUDGET = Budget()
ARMS = ("baseline", "object", "variants")


def options(arm: str, context: AssembledContext) -> ChatOptions:
    labels = [s.label for s in context.sources]
    if arm == "baseline":
        return ChatOptions(max_output_tokens=BUDGET.output_reserve, json_schema=ANSWER_SCHEMA)
    schema = answer_schema(
        labels,
        style="object" if arm == "object" else "variants",
        max_answer_chars=BUDGET.max_answer_chars,
    )
    return ChatOptions(max_output_tokens=BUDGET.output_reserve, temperature=0.0, json_schema=schema)


async def run_arm(
    model: LocalChatModel, arm: str, context: AssembledContext, relevant: set[tuple[str, str]]
) -> dict[str, Any]:
    request = ChatRequest(
        (
            ChatMessage("system", context.instructions),
            ChatMessage("user", context.user_message),
        ),
        options(arm, context),
    )
    started = time.perf_counter()
    try:
        response = await model.complete(request, Deadline.after(120))
        answer = parse_answer(response.text, context.sources)
    except AnswerContractError as error:
        return {"outcome": f"contract:{error.reason}", "seconds": time.perf_counter() - started}
    except ChatError as error:
        return {
            "outcome": f"chat:{error.category.value}",
            "detail": str(error),
            "seconds": time.perf_counter() - started,
        }
    seconds = time.perf_counter() - started
    row: dict[str, Any] = {"outcome": answer.status, "seconds": seconds}
    if answer.status == "answered":
        cited = {(c.document_id, c.chunk_id) for c in answer.citations}
        row["cites_relevant"] = bool(cited & relevant)
        row["citations"] = len(cited)
        support = check_support(answer.text, [(c.label, c.included_text) for c in answer.citations])
        row["support_flagged"] = support.flagged
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(r["outcome"] for r in rows)
    answerable = [r for r in rows if r["answerable"]]
    grounded = [r for r in answerable if r["relevant_in_context"]]
    unsupported = [r for r in rows if not r["answerable"]]
    answered = [r for r in rows if r["outcome"] == "answered"]
    failures = [r for r in rows if r["outcome"] not in ("answered", "insufficient")]
    return {
        "calls": len(rows),
        "outcomes": dict(sorted(outcomes.items())),
        "contract_failure_rate": round(len(failures) / len(rows), 3),
        "answerable": len(answerable),
        "relevant_in_context": len(grounded),
        "answered_citing_relevant": sum(1 for r in grounded if r.get("cites_relevant")),
        "unsupported_answered": sum(1 for r in unsupported if r["outcome"] == "answered"),
        "unsupported": len(unsupported),
        "support_flagged": sum(1 for r in answered if r.get("support_flagged")),
        "answered": len(answered),
        "mean_citations": round(statistics.mean(r["citations"] for r in answered), 2)
        if answered
        else None,
        "generate_s_p50": round(statistics.median(r["seconds"] for r in rows), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="Only the first N cases.")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "answer_contract.json"
    )
    args = parser.parse_args()
    cases = [
        (c.case_id, c.question, {(k.document_id, k.chunk_id or "") for k in c.relevant})
        for c in load_cases(ROOT / "samples" / "eval" / "cases.jsonl")
    ]
    cases = cases[: args.limit] if args.limit else cases
    counter = O200kCounter()
    home = Path(tempfile.mkdtemp(prefix="ragwright-contract-"))
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    with sample_retriever(home) as retriever:
        server = LocalModelServer(assemble_model(home / "models"), context_tokens=BUDGET.window)
        model = LocalChatModel(server)

        async def everything() -> None:
            for case_id, question, relevant in cases:
                for document_type in ("runbook", "note"):
                    eligibility = Eligibility(POLICY.version, (document_type,))
                    hits = retriever.search(question, eligibility, CallerScope(), k=5).hits
                    context = assemble(
                        candidates_from(hits),
                        question,
                        counter=counter,
                        max_input_tokens=BUDGET.max_input_tokens,
                    )
                    if not context.sources:
                        continue
                    for arm in ARMS:
                        row = await run_arm(model, arm, context, relevant)
                        row.update(
                            case=case_id,
                            type=document_type,
                            answerable=bool(relevant),
                            relevant_in_context=any(
                                (s.candidate.document_id, s.candidate.chunk_id) in relevant
                                for s in context.sources
                            ),
                        )
                        rows[arm].append(row)
                        print(arm, case_id, document_type, row["outcome"], flush=True)
            await model.close()

        asyncio.run(everything())
        server.close()
    summary = {arm: summarise(rows[arm]) for arm in ARMS}
    base = summary["baseline"]["contract_failure_rate"]
    record = {
        "summary": summary,
        "failure_rate_vs_baseline": {
            arm: (round(summary[arm]["contract_failure_rate"] / base, 3) if base else None)
            for arm in ARMS
        },
        "rows": rows,
    }
    print(json.dumps({"summary": summary}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

"""Query commands: ``search`` (ranked eligible evidence) and ``ask`` (grounded answers)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer

from ragwright.cli.common import (
    AsJson,
    CallerTenant,
    EligibleStates,
    EligibleTypes,
    app,
)
from ragwright.settings import load_settings


@app.command()
def search(
    question: Annotated[str, typer.Argument(help="The question to find evidence for.")],
    k: Annotated[int, typer.Option("--k", min=1, max=1000, help="Number of results.")] = 5,
    mode: Annotated[
        str, typer.Option("--mode", help="dense, sparse (BM25) or hybrid (RRF of both).")
    ] = "hybrid",
    types: EligibleTypes = None,
    states: EligibleStates = None,
    documents: Annotated[
        list[str] | None, typer.Option("--document", help="Restrict to document id (repeatable).")
    ] = None,
    tenant: CallerTenant = None,
    as_json: AsJson = False,
) -> None:
    """Find the best eligible chunks for QUESTION (default: published runbooks).

    Eligibility is part of the query: drafts or other types never fill the result, and
    an empty result means no eligible evidence (conditions are never relaxed).
    """
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.retrieve import MODES
    from ragwright.runtime import embedding_profile, open_index, open_retriever, thresholds

    if mode not in MODES:
        raise typer.BadParameter(f"must be one of {', '.join(MODES)}", param_hint="--mode")
    settings = load_settings()
    eligibility = Eligibility(
        chunking_version=settings.chunking_policy().version,
        document_types=tuple(types or ("runbook",)),
        publication_states=tuple(states or ("published",)),
        document_ids=tuple(documents or ()),
    )
    index = open_index(settings, embedding_profile(settings), write=False)
    try:
        retriever = open_retriever(settings, index)
        result = retriever.search(
            question,
            eligibility,
            CallerScope(tenant=tenant),
            k=k,
            mode=mode,
            thresholds=thresholds(settings),
        )
    finally:
        index.close()
    if as_json:
        rows = [
            {
                "document_id": h.payload.document_id,
                "chunk_id": h.payload.chunk_id,
                "chunking_version": h.payload.chunking_version,
                "document_type": h.payload.document_type,
                "publication_state": h.payload.publication_state,
                "score": h.score,
                "text": h.payload.text,
            }
            for h in result.hits
        ]
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if result.no_eligible_evidence:
        print(
            "No eligible evidence: nothing matched the required conditions"
            " (and the configured score thresholds, if any)."
        )
        return
    for rank, hit in enumerate(result.hits, start=1):
        p = hit.payload
        print(
            f"{rank}. {p.document_id}/{p.chunk_id} [{p.chunking_version}] "
            f"({p.document_type}, {p.publication_state}) score {hit.score:.4f}"
        )
        print(p.text)
        print()


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer from the documents.")],
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="Retrieved candidates.")] = 5,
    policy: Annotated[
        str, typer.Option("--policy", help="Context assembly policy.")
    ] = "seed-baseline",
    types: EligibleTypes = None,
    tenant: CallerTenant = None,
    preview: Annotated[
        bool, typer.Option("--preview", help="Stop before the model: show the exact message.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check-support", help="Flag citations whose text does not contain the claims."
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Answer QUESTION from published evidence with the configured chat model.

    Retrieves eligible chunks, assembles them within the token budget, asks the model for
    a schema-constrained answer, validates it and resolves its citations. With no
    eligible evidence, no model is called.
    """
    import asyncio

    from ragwright.adapters.tokenizer import O200kCounter
    from ragwright.core.eligibility import CallerScope, Eligibility
    from ragwright.pipeline.answer import AnswerResult, answer_question
    from ragwright.runtime import (
        answer_schema_style,
        build_chat_pipeline,
        embedding_profile,
        open_chat_provider,
        open_index,
        open_retriever,
        thresholds,
    )

    settings = load_settings()
    counter = O200kCounter(settings.home / "tokenizers")
    eligibility = Eligibility(
        chunking_version=settings.chunking_policy().version,
        document_types=tuple(types or ("runbook",)),
    )
    limits, style = thresholds(settings), answer_schema_style(settings)
    index = open_index(settings, embedding_profile(settings), write=False)

    async def run() -> AnswerResult:
        chat, close = None, None
        if not preview:
            provider, close = open_chat_provider(settings)
            chat = build_chat_pipeline(settings, [provider], counter=counter)
        try:
            return await answer_question(
                question,
                retriever=open_retriever(settings, index),
                eligibility=eligibility,
                scope=CallerScope(tenant=tenant),
                chat=chat,
                counter=counter,
                k=k,
                policy=policy,
                preview=preview,
                support_check=check,
                thresholds=limits,
                schema_style=style,
                temperature=settings.chat_temperature,
            )
        finally:
            if close is not None:
                await close()

    try:
        result = asyncio.run(run())
    finally:
        index.close()
    context = result.context
    decisions = [
        {
            "document_id": d.document_id,
            "chunk_id": d.chunk_id,
            "chunking_version": d.chunking_version,
            "outcome": d.outcome,
            "label": d.label,
            "removed_paragraphs": d.removed_paragraphs,
        }
        for d in context.decisions
    ]
    sources = [
        {
            "label": s.label,
            "document_id": s.candidate.document_id,
            "chunk_id": s.candidate.chunk_id,
            "chunking_version": s.candidate.chunking_version,
        }
        for s in context.sources
    ]
    usage = (
        {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens}
        if result.usage
        else None
    )
    if as_json:
        out: dict[str, Any] = {
            "status": result.status,
            "answer": result.answer,
            "citations": [c.label for c in result.citations],
            "sources": sources,
            "decisions": decisions,
            "input_tokens": context.input_tokens,
            "policy": context.policy,
            "usage": usage,
            "model": result.model,
            "provider": result.provider,
            "options": {
                "k": k,
                "thresholds": asdict(limits),
                "schema_style": style,
                "temperature": settings.chat_temperature,
            },
        }
        if preview:
            out["user_message"] = context.user_message
        if result.support is not None:
            out["support"] = {
                "flagged": result.support.flagged,
                "citations": [asdict(c) for c in result.support.citations],
                "unsupported_sentences": list(result.support.unsupported_sentences),
            }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    if result.status == "no_eligible_evidence":
        print("No eligible evidence: nothing was sent to the model.")
    elif preview:
        print(context.user_message)
    else:
        print(f"[{result.status}] {result.answer or '(the evidence is insufficient)'}")
        for citation in result.citations:
            where = f"{citation.document_id}/{citation.chunk_id}"
            print(f"  {citation.label}: {where} [{citation.chunking_version}]")
        if result.support is not None:
            verdict = "FLAGGED" if result.support.flagged else "ok"
            print(f"support check: {verdict}")
            idle = [c.label for c in result.support.citations if not c.supported]
            if idle:
                print(f"  cited but supporting no sentence: {', '.join(idle)}")
            for sentence in result.support.unsupported_sentences:
                print(f"  no cited source supports: {sentence}")
    if not decisions:
        return
    print("decisions:")
    for d in decisions:
        label = f" {d['label']}" if d["label"] else ""
        where = f"{d['document_id']}/{d['chunk_id']}"
        print(f"  {where}: {d['outcome']}{label} (removed {d['removed_paragraphs']})")
    used = f"{usage['input_tokens']} in / {usage['output_tokens']} out" if usage else "unknown"
    print(f"input tokens (o200k_base estimate): {context.input_tokens}; provider usage: {used}")

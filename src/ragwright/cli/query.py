"""Query commands: ``search`` (ranked eligible evidence) and ``ask`` (grounded answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from ragwright.cli.common import (
    AsJson,
    CallerTenant,
    ChunkingVersion,
    EligibleDocuments,
    EligibleStates,
    EligibleTypes,
    SearchMode,
    ThresholdDense,
    ThresholdFusion,
    ThresholdRerank,
    ThresholdSparse,
    app,
    application,
    check_choice,
    evidence_filter,
    left_out_notes,
    print_json,
    threshold_overrides,
    thresholds_line,
)
from ragwright.core.answers import ANSWER_STYLES
from ragwright.errors import AssemblyError, SourceError

if TYPE_CHECKING:
    from ragwright.application import AnswerOutcome, ChatMessage, SearchResult

MODES = ("dense", "sparse", "hybrid")
# The answerability source of the embedding profile's default (as
# ragwright.application.requests.evidence names it; not imported: a command's start
# stays light).
UNCALIBRATED_DEFAULT = "uncalibrated-default"
ASSEMBLY_POLICIES_HELP = (
    "Context assembly policy: seed-baseline or whole-or-marked-fragment, optionally with "
    "modifiers '+edges' (best evidence first and second best last), '+history=S' (share S "
    "of the input budget for --history turns) and '+prefer-current-revision'."
)


SCORE_MEANINGS = {
    "rrf": "rrf = reciprocal-rank fusion of the dense and BM25 rankings, the sum of "
    "1/(60 + rank) over both (0.0328 = ranked first by both; only the order matters)",
    "cosine": "cosine = similarity of the question's and the chunk's embeddings (-1 to 1, "
    "higher is closer)",
    "bm25": "bm25 = keyword relevance of the chunk's words to the question's (0 and up, "
    "comparable within one index only)",
    "rerank": "rerank = the reranker's relevance score (higher is more relevant)",
}


def _score_legend(result: SearchResult) -> None:
    kinds = list(dict.fromkeys(hit.score_kind for hit in result.hits))
    for kind in kinds:
        if kind in SCORE_MEANINGS:
            print(f"score: {SCORE_MEANINGS[kind]}")


@app.command()
def search(
    question: Annotated[
        str, typer.Argument(help="The question to find evidence for.", metavar="QUESTION")
    ],
    k: Annotated[
        int, typer.Option("--k", min=1, max=1000, metavar="K", help="Number of results.")
    ] = 5,
    mode: SearchMode = "hybrid",
    types: EligibleTypes = None,
    states: EligibleStates = None,
    documents: EligibleDocuments = None,
    chunking_version: ChunkingVersion = None,
    tenant: CallerTenant = None,
    threshold_dense: ThresholdDense = None,
    threshold_sparse: ThresholdSparse = None,
    threshold_fusion: ThresholdFusion = None,
    threshold_rerank: ThresholdRerank = None,
    as_json: AsJson = False,
) -> None:
    """Find the best eligible chunks for QUESTION (default: published runbooks).

    Eligibility is part of the query: drafts or other types never fill the result, and
    an empty result means no eligible evidence (conditions are never relaxed). Each
    score says its kind: cosine (dense), bm25 (sparse), rrf (hybrid) or rerank. The
    last line says which score thresholds applied and where each came from (option,
    setting or the persisted calibration). Run warm like ask (RAGWRIGHT_COMMAND_KEEP_WARM).
    """
    from ragwright.application import SearchRequest

    check_choice(mode, MODES, "--mode")
    result = application().search(
        SearchRequest(
            question=question,
            k=k,
            mode=cast(Any, mode),
            evidence=evidence_filter(types, states, documents, chunking_version),
            tenant=tenant,
            thresholds=threshold_overrides(
                threshold_dense, threshold_sparse, threshold_fusion, threshold_rerank
            ),
        )
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    if result.no_eligible_evidence:
        print(
            "No eligible evidence: nothing matched the required conditions"
            " (and the score thresholds, if any)."
        )
    for hit in result.hits:
        print(
            f"{hit.rank}. {hit.document_id}/{hit.chunk_id} [{hit.chunking_version}] "
            f"({hit.document_type}, {hit.publication_state}) {hit.score_kind} {hit.score:.4f}"
        )
        if hit.location:
            print(f"from {hit.location}")
        print(hit.text)
        print()
    _score_legend(result)
    for note in left_out_notes(data, result.chunking_version):
        print(note)
    print(thresholds_line(data))


def load_history(path: Path) -> tuple[ChatMessage, ...]:
    """Earlier turns from a JSON file: chat messages ``{"role", "content"}`` (user and
    assistant alternating, user first), or ``{"question", "answer"}`` pairs."""
    from ragwright.application import ChatMessage

    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise SourceError(str(path), f"history must be a readable JSON file ({error})") from error
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise SourceError(str(path), "history must be a JSON list of objects")
    messages: list[ChatMessage] = []
    for index, turn in enumerate(data):
        if set(turn) == {"question", "answer"}:
            messages += [
                ChatMessage("user", str(turn["question"])),
                ChatMessage("assistant", str(turn["answer"])),
            ]
        elif set(turn) == {"role", "content"} and turn["role"] in ("user", "assistant"):
            messages.append(ChatMessage(turn["role"], str(turn["content"])))
        else:
            raise SourceError(
                str(path),
                f"history[{index}]: expected {{question, answer}} or {{role, content}} "
                "with role user or assistant",
            )
    return tuple(messages)


def parse_revisions(pairs: list[str] | None) -> dict[str, str] | None:
    """``DOC=REV`` options as a mapping (``None`` when none are given)."""
    if not pairs:
        return None
    revisions = {}
    for pair in pairs:
        document, sep, revision = pair.partition("=")
        if not sep or not document or not revision:
            raise typer.BadParameter(
                f"expected DOC=REV, got {pair!r}", param_hint="--current-revision"
            )
        revisions[document] = revision
    return revisions


@app.command()
def ask(
    question: Annotated[
        str, typer.Argument(help="The question to answer from the documents.", metavar="QUESTION")
    ],
    k: Annotated[
        int, typer.Option("--k", min=1, max=100, metavar="K", help="Retrieved candidates.")
    ] = 5,
    mode: SearchMode = "hybrid",
    policy: Annotated[
        str, typer.Option("--policy", metavar="POLICY", help=ASSEMBLY_POLICIES_HELP)
    ] = "seed-baseline",
    types: EligibleTypes = None,
    states: EligibleStates = None,
    documents: EligibleDocuments = None,
    chunking_version: ChunkingVersion = None,
    tenant: CallerTenant = None,
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="FILE",
            help='Earlier turns of the conversation as JSON: [{"question", "answer"}, ...] '
            'or chat messages [{"role", "content"}, ...].',
        ),
    ] = None,
    current_revisions: Annotated[
        list[str] | None,
        typer.Option(
            "--current-revision",
            metavar="DOC=REV",
            help="The current revision of a document (repeatable), from your system of "
            "record; with the +prefer-current-revision policy, evidence stored under "
            "another revision is dropped.",
        ),
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option(
            "--deadline",
            min=0.001,
            metavar="SECONDS",
            help="Time budget for the whole answer (default: the answer_deadline setting, 120).",
        ),
    ] = None,
    preview: Annotated[
        bool,
        typer.Option(
            "--preview",
            help="Stop before the model: show the exact messages it would receive.",
        ),
    ] = False,
    check: Annotated[
        bool | None,
        typer.Option(
            "--check-support/--no-check-support",
            help="Check the answer against its cited evidence; an unsupported answer is "
            "withheld as [unsupported] (default: the answer_support_check setting, on).",
            show_default=False,
        ),
    ] = None,
    style: Annotated[
        str | None,
        typer.Option(
            "--style",
            metavar="STYLE",
            help="quoted: the model selects evidence sentences, shown verbatim; generated: "
            "the model writes the answer, support-checked; evidence: no model, the most "
            "relevant sentences, not an answer (default: the answer_style setting; auto is "
            "quoted for the local model, generated for hosted ones).",
        ),
    ] = None,
    threshold_dense: ThresholdDense = None,
    threshold_sparse: ThresholdSparse = None,
    threshold_fusion: ThresholdFusion = None,
    threshold_rerank: ThresholdRerank = None,
    progress: Annotated[
        bool,
        typer.Option(
            "--progress",
            help="Print each stage (retrieving, starting the model, answering) and the"
            " time taken to stderr even when stderr is not a terminal (on a terminal a"
            " status line is always shown).",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Answer QUESTION from eligible evidence with the configured chat model.

    Retrieves eligible chunks, assembles them within the token budget, asks the model for
    a schema-constrained answer, validates it and resolves its citations. With no
    eligible evidence, no model is called; when the best evidence sentence is less
    similar to the question than the answerability threshold (calibrated with `eval
    calibrate --write`, else the embedding profile's uncalibrated default), the answer is
    [insufficient] without a model call; the last line says which threshold applied.

    After an ask or search run in its own process, a warm command process runs the next
    ones from the same directory and environment (RAGWRIGHT_COMMAND_KEEP_WARM; `ragwright
    model status`).
    """
    import asyncio

    from ragwright.application import AnswerRequest
    from ragwright.cli.stage_display import StageDisplay
    from ragwright.core.assembly import parse_policy
    from ragwright.stages import listening

    check_choice(mode, MODES, "--mode")
    if style is not None:
        check_choice(style, ANSWER_STYLES, "--style")
    try:
        parse_policy(policy)
    except AssemblyError as error:
        raise typer.BadParameter(error.reason, param_hint="--policy") from error
    request = AnswerRequest(
        question=question,
        k=k,
        mode=cast(Any, mode),
        policy=policy,
        evidence=evidence_filter(types, states, documents, chunking_version),
        tenant=tenant,
        history=load_history(history) if history is not None else (),
        current_revisions=parse_revisions(current_revisions),
        preview=preview,
        check_support=check,
        deadline_seconds=deadline,
        style=cast(Any, style),
        thresholds=threshold_overrides(
            threshold_dense, threshold_sparse, threshold_fusion, threshold_rerank
        ),
    )
    if as_json:
        print_json(asyncio.run(application().answer(request)).to_dict())
        return
    display = StageDisplay(force_lines=progress)
    with display, listening(display):
        outcome = asyncio.run(application().answer(request))
    display.finish(outcome.to_dict().get("timings") or {})
    _print_answer(outcome)


def _print_answer(outcome: AnswerOutcome) -> None:
    data = outcome.to_dict()
    if data["status"] == "no_eligible_evidence":
        print("[no eligible evidence] No eligible evidence: nothing was sent to the model.")
    elif data["status"] == "preview":
        for message in data["request"]["messages"]:
            print(f"--- {message['role']} ---")
            print(message["content"])
    elif data["status"] == "unsupported":
        _print_unsupported(data)
    elif data["mode"] == "unavailable":
        print(
            f"[unavailable] The model could not answer ({data['degraded']}) and evidence-only "
            "results are off (RAGWRIGHT_EVIDENCE_ONLY_ON_MODEL_FAILURE=false)."
        )
    elif data["mode"] == "previous_draft":
        draft = data["draft"]
        print(
            f"[previous draft of {draft['created_at']}, {_age(draft['age_seconds'])} old] "
            f"NOT A NEW ANSWER (the model could not answer: {data['degraded']}); its cited "
            "documents are unchanged since:"
        )
        print(f"  {data['answer']}")
        _print_provenance(data)
    elif data["mode"] == "approved_template":
        template = data["template"]
        print(
            f"[approved template {template['id']} v{template['version']}] NOT A GENERATED "
            f"ANSWER (the model could not answer: {data['degraded']}):"
        )
        print(f"  {template['text']}")
        _print_evidence_only(data)
    elif data["status"] == "evidence_only":
        _print_evidence_only(data)
    elif data["status"] == "insufficient" and data["quotes"]:
        _print_declined_by_the_model(data)
    elif data["quotes"]:
        print(f"[{data['status']}] quoted from the evidence:")
        for quote in data["quotes"]:
            print(f"  {quote['text']} [{quote['id']}]")
        _print_provenance(data)
    else:
        print(f"[{data['status']}] {data['answer'] or '(the evidence is insufficient)'}")
        _print_abstention(data)
        _print_provenance(data)
        support = data["support"]
        if support is not None:
            print(f"support check: {'FLAGGED' if support['flagged'] else 'ok'}")
            idle = [c["label"] for c in support["citations"] if not c["supported"]]
            if idle:
                print(f"  cited but supporting no sentence: {', '.join(idle)}")
            for sentence in support["unsupported_sentences"]:
                print(f"  no cited source supports: {sentence}")
    _print_decisions(data)
    # What the default types and states left out matters when nothing answered.
    answered = data["status"] == "answered"
    for note in left_out_notes(data, data["options"]["chunking_version"], eligibility=not answered):
        print(note)
    print(thresholds_line(data["options"]))
    print(answerability_line(data["options"]))


CALIBRATE_HINT = "ragwright eval calibrate CASES.jsonl --write"


def answerability_line(options: dict[str, Any]) -> str:
    """Which answerability threshold applied and where it came from; an uncalibrated
    default (or none) says how to calibrate."""
    threshold, source = options["answerability_threshold"], options["answerability_source"]
    if source == UNCALIBRATED_DEFAULT:
        return (
            f"answerability threshold: {threshold:.4f}, uncalibrated (the embedding "
            "profile's default, measured on public questions, not yours; calibrate on your "
            f"own labelled questions: {CALIBRATE_HINT})"
        )
    if source == "calibration":
        return f"answerability threshold: {threshold:.4f} (calibration)"
    if source == "settings":
        return (
            f"answerability threshold: {threshold:.4f} (setting RAGWRIGHT_ANSWERABILITY_THRESHOLD)"
        )
    return (
        "answerability threshold: none, uncalibrated (the embedding profile has no measured "
        f"default: nothing is declined for want of a close sentence; {CALIBRATE_HINT})"
    )


def _age(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _print_provenance(data: dict[str, Any]) -> None:
    if data["provider"]:
        fallback = " (fallback: the primary failed)" if data["fallback"] else ""
        verb = "answered by" if data["status"] == "answered" else "model:"
        print(f"  {verb} {data['model']} via {data['provider']}{fallback}")
    for citation in data["citations"]:
        where = f"{citation['document_id']}/{citation['chunk_id']}"
        location = f" ({citation['location']})" if citation.get("location") else ""
        print(f"  {citation['label']}: {where}{location} [{citation['chunking_version']}]")


def _uncalibrated(data: dict[str, Any]) -> str:
    return (
        " (the uncalibrated default)"
        if data["options"]["answerability_source"] == UNCALIBRATED_DEFAULT
        else ""
    )


def _print_abstention(data: dict[str, Any]) -> None:
    signal = data["answerability"]
    if data["status"] == "insufficient" and signal is not None and not signal["answerable"]:
        print(
            f"  no evidence sentence is close enough to the question: best {signal['score']:.3f}"
            f" ({signal['best_sentence']}), threshold {signal['threshold']:.3f}"
            f"{_uncalibrated(data)}; the model was not called"
        )


def _print_declined_by_the_model(data: dict[str, Any]) -> None:
    signal = data["answerability"]
    passed = (
        f" although the evidence passed the answerability check ({signal['score']:.3f},"
        f" threshold {signal['threshold']:.3f}{_uncalibrated(data)})"
        if signal is not None and signal["threshold"] is not None
        else " (no answerability threshold is calibrated: eval calibrate --write)"
    )
    print(f"[insufficient] {data['model']} found no sentence that answers the question{passed}.")
    print("  The most relevant evidence sentences (NOT AN ANSWER):")
    for quote in data["quotes"]:
        print(f"  {quote['text']} [{quote['id']}]")


def _print_evidence_only(data: dict[str, Any]) -> None:
    reason = (
        f" (the model could not answer: {data['degraded']})"
        if data["degraded"]
        else " (no model was asked)"
    )
    print(f"[evidence only] NOT AN ANSWER{reason}. The most relevant evidence sentences:")
    if data["degraded"] == "deadline_exhausted":
        print(
            f"  the {data['options']['deadline_seconds']:g} s answer budget ran out; raise it "
            "with ask --deadline or the RAGWRIGHT_ANSWER_DEADLINE setting"
        )
    for quote in data["quotes"]:
        print(f"  {quote['text']} [{quote['id']}]")
    _print_provenance(data)


def _print_unsupported(data: dict[str, Any]) -> None:
    print(
        "[unsupported] The model's answer is not supported by the evidence it cites, "
        "so it is withheld."
    )
    print(f"  withheld answer: {data['withheld_answer']!r}")
    support = data["support"]
    if not support["checked_sentences"]:
        print("  nothing in the answer can be checked against the evidence")
    for sentence in support["followed_instructions"]:
        print(f"  follows text in the evidence addressed to the model: {sentence}")
    for sentence in support["unsupported_sentences"]:
        print(f"  no cited source supports: {sentence}")
    if support["instruction_sources"]:
        labels = ", ".join(support["instruction_sources"])
        print(f"  evidence holding instructions (ignored as evidence): {labels}")
    print("evidence:")
    cited = {c["label"] for c in data["citations"]}
    for source in data["sources"]:
        mark = " (cited)" if source["label"] in cited else ""
        where = f"{source['document_id']}/{source['chunk_id']}"
        print(f"  {source['label']}: {where} [{source['chunking_version']}]{mark}")


def _print_decisions(data: dict[str, Any]) -> None:
    if not data["decisions"]:
        return
    print("decisions:")
    for d in data["decisions"]:
        label = f" {d['label']}" if d["label"] else ""
        where = f"{d['document_id']}/{d['chunk_id']}"
        print(f"  {where}: {d['outcome']}{label} (removed {d['removed_paragraphs']})")
    usage = data["usage"]
    if usage:
        used = f"{usage['input_tokens']} in / {usage['output_tokens']} out"
    else:
        used = "unknown" if data["provider"] else "none (no model call)"
    print(f"input tokens (o200k_base estimate): {data['input_tokens']}; provider usage: {used}")

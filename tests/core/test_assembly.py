from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragwright.adapters.tokenizer import O200kCounter
from ragwright.core.assembly import INSTRUCTIONS, Candidate, assemble, render
from ragwright.errors import AssemblyError
from ragwright.types import ParagraphPositions

VERSION = "section-paragraphs-80w-overlap1-v1"
HEADING = "Shutdown and the queue"
STOP = "When shutdown starts, stop accepting new work and complete the channel writer."
DEADLINE = "Drain remaining items only while the shutdown deadline allows. Then cancel I/O."
TOKEN = "Pass the deadline cancellation token to each asynchronous operation used while draining."
QUESTION = "Should I drain all queued work during shutdown?"


class Words:
    encoding_name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def chunk(
    chunk_id: str,
    paragraphs: list[str],
    score: float,
    indexes: tuple[int, ...] | None = None,
    document_id: str = "worker-shutdown",
    section_id: str = "shutdown",
) -> Candidate:
    return Candidate(
        document_id=document_id,
        chunk_id=chunk_id,
        chunking_version=VERSION,
        section_id=section_id,
        title="Stop a background service cleanly",
        heading=HEADING,
        text=HEADING + "\n\n" + "\n\n".join(paragraphs),
        score=score,
        positions=ParagraphPositions(0, indexes) if indexes is not None else None,
    )


P0 = chunk("shutdown/p0", [STOP, DEADLINE], 0.9, (0, 1))
P1 = chunk("shutdown/p1", [DEADLINE, TOKEN], 0.8, (1, 2))


@pytest.fixture(scope="module")
def o200k() -> O200kCounter:
    return O200kCounter()


def test_overlapping_windows_send_the_shared_paragraph_once(o200k: O200kCounter) -> None:
    ctx = assemble([P1, P0], QUESTION, counter=o200k, max_input_tokens=3328)
    assert [s.label for s in ctx.sources] == ["S1", "S2"]
    assert [s.included_text for s in ctx.sources] == [STOP + "\n\n" + DEADLINE, TOKEN]
    assert ctx.user_message.count("Drain remaining items") == 1
    assert [(d.chunk_id, d.outcome, d.label, d.removed_paragraphs) for d in ctx.decisions] == [
        ("shutdown/p0", "admitted", "S1", 0),
        ("shutdown/p1", "admitted", "S2", 1),
    ]
    assert ctx.sources[1].candidate.text == P1.text  # the original stays intact
    message = json.loads(ctx.user_message)
    assert message["question"] == QUESTION and message["evidence"][1]["id"] == "S2"
    assert ctx.input_tokens == o200k.count(ctx.instructions) + o200k.count(ctx.user_message)


def test_the_seed_boundary(o200k: O200kCounter) -> None:
    smaller = chunk("shutdown/budget-small", [DEADLINE], 1.0)
    larger = dataclasses.replace(
        smaller,
        chunk_id="shutdown/budget-fixture",
        score=2.0,
        text=smaller.text + "\n\n" + " ".join(["Additional fixture text."] * 100),
    )
    exact = assemble([smaller], QUESTION, counter=o200k, max_input_tokens=10**6).input_tokens
    fits = assemble([smaller], QUESTION, counter=o200k, max_input_tokens=exact)
    assert [s.candidate.chunk_id for s in fits.sources] == ["shutdown/budget-small"]
    assert fits.input_tokens == exact
    none = assemble([smaller], QUESTION, counter=o200k, max_input_tokens=exact - 1)
    assert none.sources == () and none.decisions[0].outcome == "excluded_by_budget"
    constrained = assemble([larger, smaller], QUESTION, counter=o200k, max_input_tokens=exact)
    assert constrained.decisions[0].outcome == "excluded_by_budget"
    assert constrained.decisions[0].chunk_id == "shutdown/budget-fixture"
    assert [s.included_text for s in constrained.sources] == [DEADLINE]  # kept every paragraph


def test_rejected_candidate_does_not_mark_paragraphs_seen() -> None:
    big = chunk("shutdown/p0", [STOP, DEADLINE, " ".join(["filler"] * 300)], 0.9, (0, 1, 2))
    small = chunk("shutdown/p1", [DEADLINE], 0.5, (1,))
    ctx = assemble([big, small], QUESTION, counter=Words(), max_input_tokens=200)
    assert [d.outcome for d in ctx.decisions] == ["excluded_by_budget", "admitted"]
    assert ctx.sources[0].included_text == DEADLINE


def test_a_candidate_with_nothing_new_is_duplicate_evidence_without_a_label() -> None:
    again = chunk("shutdown/p0-copy", [STOP, DEADLINE], 0.5, (0, 1))
    ctx = assemble([P0, again], QUESTION, counter=Words(), max_input_tokens=500)
    assert [s.label for s in ctx.sources] == ["S1"]
    assert ctx.decisions[1].outcome == "duplicate_evidence" and ctx.decisions[1].label is None


def test_same_text_at_another_position_is_kept_same_position_removed() -> None:
    warning = "Warning: take a backup first."
    before_a = chunk("s/p0", [warning, STOP], 0.9, (0, 1))
    before_b = chunk("s/p5", [warning, TOKEN], 0.8, (5, 6))  # the warning repeated later
    ctx = assemble([before_a, before_b], QUESTION, counter=Words(), max_input_tokens=500)
    assert ctx.sources[1].included_text == warning + "\n\n" + TOKEN
    overlap = chunk("s/p1", [STOP, DEADLINE], 0.7, (1, 2))
    ctx = assemble([before_a, overlap], QUESTION, counter=Words(), max_input_tokens=500)
    assert ctx.sources[1].included_text == DEADLINE


def test_identical_text_from_another_document_is_separate_evidence() -> None:
    draft = chunk("shutdown/p0", [STOP, DEADLINE], 0.8, (0, 1), document_id="worker-shutdown-copy")
    ctx = assemble([P0, draft], QUESTION, counter=Words(), max_input_tokens=500)
    assert [s.included_text for s in ctx.sources] == [STOP + "\n\n" + DEADLINE] * 2


def test_ties_break_by_document_version_and_chunk() -> None:
    a = chunk("s/p1", [TOKEN], 0.5, (2,), document_id="b-doc")
    b = chunk("s/p0", [STOP], 0.5, (0,), document_id="a-doc")
    ctx = assemble([a, b], QUESTION, counter=Words(), max_input_tokens=500)
    assert [s.candidate.document_id for s in ctx.sources] == ["a-doc", "b-doc"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_input_tokens": 5}, "allowance"),
        ({"max_input_tokens": 500, "policy": "magic"}, "unknown assembly policy"),
    ],
)
def test_instructions_and_question_are_never_evicted(
    kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(AssemblyError) as caught:
        assemble([P0], QUESTION, counter=Words(), **kwargs)  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_malformed_candidate_text_is_refused() -> None:
    with pytest.raises(AssemblyError):
        assemble(
            [dataclasses.replace(P0, text="no heading here")],
            QUESTION,
            counter=Words(),
            max_input_tokens=500,
        )


paragraph = st.lists(
    st.sampled_from(["drain", "deadline", "token", "queue", "cancel", "é", '"q"']),
    min_size=1,
    max_size=12,
).map(" ".join)


@st.composite
def candidate_sets(draw: st.DrawFn) -> list[Candidate]:
    pool = draw(st.lists(paragraph, min_size=1, max_size=6))
    out = []
    for i in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, len(pool) - 1))
        end = draw(st.integers(start + 1, len(pool)))
        out.append(
            chunk(
                f"s/p{start}-{i}",
                pool[start:end],
                draw(st.floats(0, 1)),
                tuple(range(start, end)),
                document_id=draw(st.sampled_from(["a", "b"])),
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(candidate_sets(), st.integers(0, 280))
def test_message_fits_admitted_text_is_retrieved_text_and_output_is_deterministic(
    candidates: list[Candidate], spare: int
) -> None:
    counter = Words()
    # The allowance starts where instructions and question alone fit.
    allowance = counter.count(INSTRUCTIONS) + counter.count(render([], QUESTION)) + spare
    ctx = assemble(candidates, QUESTION, counter=counter, max_input_tokens=allowance)
    assert ctx.input_tokens <= allowance
    for source in ctx.sources:
        body = source.candidate.text.split("\n\n")[1:]
        assert all(p in body for p in source.included_text.split("\n\n"))
    assert len(ctx.decisions) == len(candidates)
    assert (
        assemble(list(reversed(candidates)), QUESTION, counter=counter, max_input_tokens=allowance)
        == ctx
    )


LONG = " ".join(
    f"Sentence {i} explains one more careful step of the drain procedure." for i in range(40)
)


def test_whole_or_marked_fragment_cuts_at_a_sentence_and_marks_it() -> None:
    big = chunk("s/p0", [LONG], 0.9, (0,))
    seed = assemble([big], QUESTION, counter=Words(), max_input_tokens=250)
    assert seed.sources == () and seed.decisions[0].outcome == "excluded_by_budget"
    ctx = assemble(
        [big], QUESTION, counter=Words(), max_input_tokens=250, policy="whole-or-marked-fragment"
    )
    (source,) = ctx.sources
    assert ctx.decisions[0].outcome == "truncated" and ctx.decisions[0].label == "S1"
    assert source.included_text.endswith(". [...]")
    assert LONG.startswith(source.included_text.removesuffix(" [...]"))
    assert ctx.input_tokens <= 250 and ctx.policy == "whole-or-marked-fragment-v1"


def test_fragments_under_the_floor_are_dropped() -> None:
    big = chunk("s/p0", [LONG], 0.9, (0,))
    # Room for about 30 words of evidence: under the 40-token fragment floor.
    allowance = Words().count(INSTRUCTIONS) + Words().count(render([], QUESTION)) + 30
    ctx = assemble(
        [big],
        QUESTION,
        counter=Words(),
        max_input_tokens=allowance,
        policy="whole-or-marked-fragment",
    )
    assert ctx.sources == () and ctx.decisions[0].outcome == "excluded_by_budget"


def test_a_cut_paragraph_is_not_marked_seen() -> None:
    big = chunk("s/p0", [STOP, LONG], 0.9, (0, 1))
    later = chunk("s/p1", [LONG], 0.1, (1,))
    ctx = assemble(
        [big, later],
        QUESTION,
        counter=Words(),
        max_input_tokens=400,
        policy="whole-or-marked-fragment",
    )
    assert ctx.decisions[0].outcome == "truncated"
    # The cut paragraph may still come whole from a later chunk if it fits (it does not
    # here), but it must not be reported as duplicate evidence.
    assert ctx.decisions[1].outcome != "duplicate_evidence"


def test_edges_placement_puts_the_second_best_last() -> None:
    parts = [
        chunk(f"s/p{i}", [f"Unique paragraph number {i}."], 1.0 - i / 10, (i,)) for i in range(4)
    ]
    ctx = assemble(
        parts, QUESTION, counter=Words(), max_input_tokens=500, policy="seed-baseline+edges"
    )
    assert [s.label for s in ctx.sources] == ["S1", "S3", "S4", "S2"]
    assert [e["id"] for e in json.loads(ctx.user_message)["evidence"]] == ["S1", "S3", "S4", "S2"]
    assert ctx.policy == "seed-baseline+edges-v1"


def test_history_sits_after_the_evidence_and_drops_the_oldest_turns() -> None:
    from ragwright.core.assembly import Turn

    turns = [Turn(f"old question {i}", "answer " * 20) for i in range(6)]
    ctx = assemble(
        [P0],
        QUESTION,
        counter=Words(),
        max_input_tokens=220,
        policy="seed-baseline+history=0.3",
        history=turns,
    )
    body = json.loads(ctx.user_message)
    assert list(body) == ["evidence", "history", "question"]
    assert 0 < ctx.history_turns < 6 and ctx.history_dropped == 6 - ctx.history_turns
    assert body["history"][-1]["question"] == "old question 5"  # the newest survive
    assert ctx.input_tokens <= 220 and body["question"] == QUESTION


def test_prefer_current_revision_drops_stale_candidates() -> None:
    old = dataclasses.replace(P0, revision="r1", chunk_id="shutdown/p0-old")
    new = dataclasses.replace(P1, revision="r2")
    ctx = assemble(
        [old, new],
        QUESTION,
        counter=Words(),
        max_input_tokens=500,
        policy="seed-baseline+prefer-current-revision",
        current_revisions={"worker-shutdown": "r2"},
    )
    assert [d.outcome for d in ctx.decisions] == ["stale_revision", "admitted"]
    assert [s.candidate.revision for s in ctx.sources] == ["r2"]


@pytest.mark.parametrize(
    "spec",
    ["fancy", "seed-baseline+sideways", "seed-baseline+history=2", "seed-baseline+history=x"],
)
def test_bad_policy_specs_are_refused(spec: str) -> None:
    with pytest.raises(AssemblyError):
        assemble([P0], QUESTION, counter=Words(), max_input_tokens=500, policy=spec)

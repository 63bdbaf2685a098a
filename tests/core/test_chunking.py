from __future__ import annotations

import hashlib
import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragwright.core.chunking import build_chunks, chunk_point_id, split_block, word_count
from ragwright.core.documents import validate_document
from ragwright.errors import ChunkingError
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

# The seeds' controlled runbook, rewritten in our own words with the same shape:
# three shutdown paragraphs, two capacity paragraphs, all short enough for 80 words.
SHUTDOWN = SourceSection(
    "shutdown",
    "Shutdown and the queue",
    (
        "When shutdown begins, stop accepting new work and complete the channel writer. "
        "Readers can then drain the items that were already waiting in the queue before exit.",
        "Drain the remaining items only while the shutdown deadline still allows it. If the "
        "deadline expires, cancel the active I/O and leave unfinished work for the retry path.",
        "Pass the deadline cancellation token to each asynchronous operation used while draining. "
        "A handler that ignores the token keeps running after the shutdown budget has expired.",
    ),
)
CAPACITY = SourceSection(
    "capacity",
    "Queue capacity",
    (
        "Use a bounded channel so queued work cannot grow without limit; with the full mode set "
        "to wait, producers pause until capacity frees up.",
        "A completed writer rejects further writes, so producers must handle completion during "
        "shutdown instead of retrying against the same writer.",
    ),
)


def make_doc(*sections: SourceSection, document_id: str = "worker-shutdown") -> SourceDocument:
    return validate_document(
        document_id=document_id,
        title="Stop a worker",
        document_type="runbook",
        publication_state="published",
        sections=list(sections),
    )


def test_seed_windows_overlap_by_one_paragraph_within_sections() -> None:
    chunks = build_chunks(make_doc(SHUTDOWN, CAPACITY), ChunkingPolicy())
    assert [(c.chunk_id, c.positions.paragraph_indexes) for c in chunks] == [
        ("shutdown/p0", (0, 1)),
        ("shutdown/p1", (1, 2)),
        ("capacity/p0", (0, 1)),
    ]
    assert chunks[0].text == SHUTDOWN.heading + "\n\n" + "\n\n".join(SHUTDOWN.paragraphs[:2])
    assert chunks[2].positions.section_index == 1


def test_no_overlap_gives_disjoint_windows() -> None:
    chunks = build_chunks(make_doc(SHUTDOWN), ChunkingPolicy(max_words=40, overlap=False))
    assert [c.positions.paragraph_indexes for c in chunks] == [(0,), (1,), (2,)]
    assert chunks[0].chunking_version == "section-paragraphs-40w-overlap0-v1"


def test_budget_counts_the_heading() -> None:
    section = SourceSection("s", "one two three", ("a b c d", "e f g h"))
    # 3 + 4 + 4 = 11 words: fits at 11, splits at 10.
    assert len(build_chunks(make_doc(section), ChunkingPolicy(max_words=11))) == 1
    split = build_chunks(make_doc(section), ChunkingPolicy(max_words=10, overlap=True))
    assert [c.positions.paragraph_indexes for c in split] == [(0,), (1,)]


def test_overlap_only_after_a_window_of_two_or_more_paragraphs() -> None:
    section = SourceSection("s", "h", ("a " * 5, "b " * 5, "c " * 9, "d " * 2))
    chunks = build_chunks(make_doc(section), ChunkingPolicy(max_words=12, overlap=True))
    # [a,b] (11 words) → next starts at b; [b] alone cannot take c → [b] is a 1-paragraph
    # window, so the next window starts after it, at c.
    assert [c.positions.paragraph_indexes for c in chunks] == [(0, 1), (1,), (2, 3)]


def test_an_oversize_paragraph_is_split_at_sentences_and_marked_not_refused() -> None:
    sentences = [f"Step {i} drains the worker and checks the queue again." for i in range(12)]
    section = SourceSection("steps", "Steps", ("short one.", " ".join(sentences)))
    chunks = build_chunks(make_doc(section), ChunkingPolicy())
    assert {c.chunking_version for c in chunks} == {"section-paragraphs-80w-overlap1-v1"}
    assert all(c.word_count <= 80 for c in chunks)
    body = " ".join(c.text.split("\n\n", 1)[1] for c in chunks)
    assert all(sentence in body for sentence in sentences)  # cut between sentences only
    assert [c.split for c in chunks] == [True] * len(chunks)


def test_the_seed_policy_is_unchanged_where_no_paragraph_is_split() -> None:
    """Same texts, ids and positions as the sentence-free windowing of the seeds: the
    chunks of a document the seeds accepted carry no split mark and the seeds' ids."""
    chunks = build_chunks(make_doc(SHUTDOWN), ChunkingPolicy())
    assert not any(c.split for c in chunks)
    for chunk in chunks:
        identity = f"section-paragraphs-80w-overlap1-v1\nworker-shutdown\n{chunk.chunk_id}"
        digest = hashlib.sha256(identity.encode()).digest()[:16]
        assert chunk.point_id.bytes == digest


def test_point_id_is_sha256_prefix_read_big_endian() -> None:
    identity = "section-paragraphs-80w-overlap1-v1\nworker-shutdown\nshutdown/p0"
    digest = hashlib.sha256(identity.encode()).hexdigest()
    expected = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    assert str(chunk_point_id(*identity.split("\n"))) == expected
    assert str(build_chunks(make_doc(SHUTDOWN), ChunkingPolicy())[0].point_id) == expected


# The seeds' published example: section-paragraphs, worker-shutdown, shutdown/p0.
SEED_EXAMPLE = ("section-paragraphs-80w-overlap1-v1", "worker-shutdown", "shutdown/p0")
SEED_EXAMPLE_ID = "0b180d9b-57a4-c523-1ed4-96456ff9e6fd"


def test_the_seed_example_keeps_its_published_point_id() -> None:
    assert str(chunk_point_id(*SEED_EXAMPLE)) == SEED_EXAMPLE_ID
    assert str(build_chunks(make_doc(SHUTDOWN), ChunkingPolicy())[0].point_id) == SEED_EXAMPLE_ID


def test_ids_whose_parts_hold_newlines_do_not_collide() -> None:
    version = SEED_EXAMPLE[0]
    assert chunk_point_id(version, "a\nb", "s") != chunk_point_id(version, "a", "b\ns")


def test_the_tenant_is_part_of_the_chunk_identity() -> None:
    untenanted = build_chunks(make_doc(SHUTDOWN), ChunkingPolicy())
    ids = {
        tenant: {c.point_id for c in build_chunks(_tenanted(tenant), ChunkingPolicy())}
        for tenant in ("acme", "globex")
    }
    assert str(untenanted[0].point_id) == SEED_EXAMPLE_ID
    assert not ids["acme"] & ids["globex"]
    assert not ids["acme"] & {c.point_id for c in untenanted}


def _tenanted(tenant: str) -> SourceDocument:
    return validate_document(
        document_id="worker-shutdown",
        title="Stop a worker",
        document_type="runbook",
        publication_state="published",
        sections=[SHUTDOWN],
        tenant=tenant,
    )


# Every part up to two characters over an alphabet holding the seeds' separator and a NUL:
# a derivation that only joined parts with newlines would collide many times over.
_PARTS = ["".join(chars) for n in range(3) for chars in itertools.product("a\n\x00", repeat=n)]


def test_chunk_identity_is_injective() -> None:
    identities = list(itertools.product(_PARTS, _PARTS, _PARTS, [None, *_PARTS]))
    assert len({chunk_point_id(*identity) for identity in identities}) == len(identities)


def test_same_chunk_in_another_document_gets_another_point_id() -> None:
    a = build_chunks(make_doc(SHUTDOWN), ChunkingPolicy())
    b = build_chunks(make_doc(SHUTDOWN, document_id="worker-shutdown-draft"), ChunkingPolicy())
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    assert not {c.point_id for c in a} & {c.point_id for c in b}


def test_sentence_blocks_split_oversize_prose_at_sentence_ends() -> None:
    sentences = [f"Sentence number {i} says something useful here." for i in range(20)]
    section = SourceSection("text", "Abstract", (" ".join(sentences),))
    chunks = build_chunks(make_doc(section), ChunkingPolicy(kind="sentence-blocks", max_words=40))
    assert chunks[0].chunking_version == "sentence-blocks-40w-overlap1-v1"
    assert all(c.word_count <= 40 for c in chunks)
    body = " ".join(c.text.split("\n\n", 1)[1] for c in chunks)
    for sentence in sentences:
        assert sentence in body  # never cut inside a sentence


def test_split_block_refences_code_and_keeps_every_line() -> None:
    lines = [f"kubectl get pods -n team-{i} -o wide" for i in range(30)]
    block = "```bash\n" + "\n".join(lines) + "\n```"
    pieces = split_block(block, 40)
    assert len(pieces) > 1
    for piece in pieces:
        assert piece.startswith("```bash\n") and piece.endswith("\n```")
        assert word_count(piece) <= 40
    kept = [line for piece in pieces for line in piece.split("\n")[1:-1]]
    assert kept == lines


def test_fence_wider_than_the_budget_falls_back_to_word_cuts() -> None:
    pieces = split_block("```bash\necho a b c d\n```", 2)
    assert all(word_count(p) <= 2 for p in pieces)
    assert " ".join(pieces).split() == ["```bash", "echo", "a", "b", "c", "d", "```"]


def test_split_block_keeps_list_items_whole_and_markers_attached() -> None:
    block = "\n".join(
        f"{i}. Run step {i} of the procedure and then check it." for i in range(1, 12)
    )
    pieces = split_block(block, 25)
    assert all(word_count(p) <= 25 for p in pieces)
    items = [line for piece in pieces for line in piece.split("\n")]
    assert items == block.split("\n")


@pytest.mark.parametrize("kind", ["section-paragraphs", "sentence-blocks"])
def test_a_heading_longer_than_the_budget_is_an_error(kind: str) -> None:
    section = SourceSection("s", "word " * 30, ("short",))
    with pytest.raises(ChunkingError, match="the heading alone has 30 words"):
        build_chunks(make_doc(section), ChunkingPolicy(kind=kind, max_words=20))  # type: ignore[arg-type]


def test_a_word_longer_than_the_ceiling_is_cut_between_characters() -> None:
    """A table's separator row: one 'word' of 300 dashes under a 2-word heading."""
    section = SourceSection("s", "Sizes table", ("-" * 300,))
    policy = ChunkingPolicy(max_tokens=40)
    chunks = build_chunks(make_doc(section), policy, count_tokens=len)  # a token a character
    assert len(chunks) > 1 and all(len(c.text) <= 40 for c in chunks)
    assert "".join(c.text.split("\n\n", 1)[1] for c in chunks) == "-" * 300


def test_the_profile_limit_bounds_every_window_without_a_policy_ceiling() -> None:
    section = SourceSection("s", "Notes", ("a==b c==d e==f g==h i==j",))
    chunks = build_chunks(
        make_doc(section), ChunkingPolicy(), count_tokens=_whitespace_tokens, token_limit=4
    )
    assert chunks[0].chunking_version == "section-paragraphs-80w-overlap1-v1"
    assert all(_whitespace_tokens(c.text) <= 4 for c in chunks)
    assert " ".join(c.text.split("\n\n", 1)[1] for c in chunks).split() == (
        section.paragraphs[0].split()
    )


words = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
paragraphs = st.lists(words, min_size=1, max_size=12).map(" ".join)
sections = st.lists(
    st.tuples(
        st.lists(words, min_size=1, max_size=3).map(" ".join),
        st.lists(paragraphs, min_size=1, max_size=8),
    ),
    min_size=1,
    max_size=4,
)


def _doc(raw: list[tuple[str, list[str]]]) -> SourceDocument:
    return make_doc(*(SourceSection(f"s{i}", h, tuple(ps)) for i, (h, ps) in enumerate(raw)))


@settings(max_examples=200, deadline=None)
@given(
    sections,
    st.integers(min_value=15, max_value=60),
    st.booleans(),
    st.sampled_from(["section-paragraphs", "sentence-blocks"]),
)
def test_chunks_cover_every_paragraph_within_budget_with_unique_stable_ids(
    raw: list[tuple[str, list[str]]], budget: int, overlap: bool, kind: str
) -> None:
    policy = ChunkingPolicy(kind=kind, max_words=budget, overlap=overlap)  # type: ignore[arg-type]
    document = _doc(raw)
    chunks = build_chunks(document, policy)
    assert all(c.word_count <= budget and word_count(c.text) == c.word_count for c in chunks)
    for index, section in enumerate(document.sections):
        own = [c for c in chunks if c.section_id == section.section_id]
        assert all(c.positions.section_index == index for c in own)
        covered = {i for c in own for i in c.positions.paragraph_indexes}
        if kind == "section-paragraphs":
            assert covered == set(range(len(section.paragraphs)))
    ids = [c.point_id for c in chunks]
    assert len(set(ids)) == len(ids)
    assert ids == [c.point_id for c in build_chunks(document, policy)]
    assert all(isinstance(i, uuid.UUID) for i in ids)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(words, min_size=1, max_size=30).map(" ".join), min_size=1, max_size=6),
    st.integers(5, 40),
)
def test_split_block_pieces_fit_and_preserve_all_words(sentences: list[str], budget: int) -> None:
    block = " ".join(s[:1].upper() + s[1:] + "." for s in sentences)
    pieces = split_block(block, budget)
    assert all(word_count(p) <= budget for p in pieces)
    assert " ".join(pieces).split() == block.split()


def _whitespace_tokens(text: str) -> int:
    # A stand-in counter where every character of "=" counts as a token, so a line of
    # formulas costs far more tokens than words, as code and notation do for real models.
    return len(text.split()) + text.count("=")


def test_token_ceiling_splits_blocks_that_fit_the_word_budget() -> None:
    formula = " ".join(["x==y"] * 8) + "."
    section = SourceSection(
        "s", "Notes", (f"Intro sentence here. {formula} Closing sentence follows.",)
    )
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=80, max_tokens=16)
    assert policy.version == "sentence-blocks-80w-16t-overlap1-v1"
    chunks = build_chunks(make_doc(section), policy, count_tokens=_whitespace_tokens)
    assert len(chunks) > 1
    assert all(_whitespace_tokens(c.text) <= 16 for c in chunks)
    body = " ".join(c.text.split("\n\n", 1)[1] for c in chunks)
    assert body.split() == section.paragraphs[0].split()


def test_token_ceiling_splits_under_the_seed_policy_too() -> None:
    section = SourceSection("s", "Notes", ("a==b c==d e==f",))
    policy = ChunkingPolicy(max_words=80, max_tokens=7)  # "Notes a==b c==d" is 7
    chunks = build_chunks(make_doc(section), policy, count_tokens=_whitespace_tokens)
    assert [c.text for c in chunks] == ["Notes\n\na==b c==d", "Notes\n\ne==f"]
    assert all(c.split for c in chunks)


def test_a_heading_alone_over_the_ceiling_is_an_error_in_tokens() -> None:
    section = SourceSection("s", "one two three four five", ("text",))
    policy = ChunkingPolicy(max_tokens=3)
    with pytest.raises(ChunkingError, match="tokens"):
        build_chunks(make_doc(section), policy, count_tokens=_whitespace_tokens)


def test_token_ceiling_needs_a_counter() -> None:
    from ragwright.errors import ConfigError

    with pytest.raises(ConfigError):
        build_chunks(make_doc(SHUTDOWN), ChunkingPolicy(kind="sentence-blocks", max_tokens=64))


@pytest.mark.parametrize(
    ("kind", "paragraphs", "pages", "expected"),
    [
        # H(1) + 3 + 3 words fit 10, the 8-word paragraph does not: (1, 2), then (4, 4).
        ("section-paragraphs", ("a b c", "d e f", "g h i j k l m n"), (1, 2, 4), [(1, 2), (4, 4)]),
        # The 12-word paragraph of page 3 is split at sentence ends; both pieces keep page 3.
        (
            "sentence-blocks",
            ("a b c", "One two three four. Five six seven eight. Nine ten eleven twelve."),
            (1, 3),
            [(1, 1), (3, 3), (3, 3)],
        ),
    ],
)
def test_a_chunk_records_the_first_and_last_page_of_its_blocks(
    kind: str,
    paragraphs: tuple[str, ...],
    pages: tuple[int, ...],
    expected: list[tuple[int, int]],
) -> None:
    section = SourceSection("s", "H", paragraphs, pages)
    document = SourceDocument("d", "T", "note", "published", (section,), "r")
    policy = ChunkingPolicy(kind=kind, max_words=10, overlap=False)  # type: ignore[arg-type]
    assert [c.pages for c in build_chunks(document, policy)] == expected

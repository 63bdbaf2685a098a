"""Chunking policies, windows, chunk ids and deterministic point ids.

The default policy is the seeds' ``section-paragraphs`` policy, reproduced exactly on
every document it could chunk:

* complete paragraphs are grouped within one section under a word budget that
  **includes the heading**; words are whitespace-separated tokens;
* each chunk's text is ``heading + "\\n\\n" + "\\n\\n".join(paragraphs)``, or only the
  paragraphs when the heading is empty (a BEIR document without a title);
* with overlap on, the next window starts at the previous window's last paragraph,
  but only when that window held at least two paragraphs (so a lone paragraph never
  repeats and the loop always advances);
* windows never cross sections.

Where the seeds raise (a paragraph that cannot fit beside its heading), this policy
splits that paragraph the way ``sentence-blocks`` does (below) and marks its chunks
``split``: the seeds refused such a document, so no chunk the seed rules produce
changes, every seed id is kept, and the version string stays the seeds'. Nothing is cut
silently: ``chunks`` and ``ingest`` name the documents whose paragraphs were split
(docs/decisions.md, 2026-12-08).

``sentence-blocks`` is a separately versioned policy for prose without usable paragraph
structure (BEIR abstracts, long single-paragraph passages, long procedure lists). Before
windowing it splits every block that cannot fit beside its heading into budget-sized
blocks: prose at sentence ends, lists and tables at line starts, fenced code at line
boundaries with each piece re-fenced so it stays valid Markdown. Only a single sentence
longer than the budget is cut between words, and a single word longer than the budget
(a table's separator row, a long URL) between characters. Block indexes (chunk ids,
positions) count the split blocks, under both policies.

Token ceiling: word budgets cannot bound model tokens (code and scientific notation run
to three tokens a word), and the embedding stage refuses over-long inputs rather than
truncating them. Every window must fit the embedding profile's input limit
(``token_limit``, given by the caller with its counter), and ``max_tokens`` when the
policy sets a lower one, as measured on the exact embedding input; blocks are split until
they fit. The profile's own limit is not part of the version: it is part of the
collection's embedding profile, and it only ever changes what the embedding stage used to
refuse. Only a heading that alone exceeds a budget raises :class:`ChunkingError`.

Chunk identity: SHA-256 of an identity string, first 16 bytes read as a big-endian UUID.
For an untenanted chunk whose parts hold no control character the string is the seeds'
``"{version}\\n{document_id}\\n{chunk_id}"``, byte-for-byte, so every seed id is kept.
Any other chunk (a tenant, or a part with a control character, which document
validation refuses but this function does not assume) hashes the JSON array
``[version, document_id, chunk_id, tenant]``. JSON encoding is injective, the seeds' form
is injective on parts without a newline, and the two never meet: the seeds' form holds two
raw newlines, JSON escapes every one. So no two identities share a string:
``("a\\nb", "s")`` and ``("a", "b\\ns")`` differ, and so do the same file name under two
tenants.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Sequence

from ragwright.errors import ChunkingError, ConfigError, DocumentError
from ragwright.types import Chunk, ChunkingPolicy, ParagraphPositions, SourceDocument

_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")
# A unit boundary: after sentence-ending punctuation followed by whitespace, or before a
# new line that starts a list item, a table row or a heading inside the block.
_LIST_MARKER = re.compile(r"\d+[.)]")
_UNIT_BOUNDARY = re.compile(
    r"(?:(?<=[.!?:])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9\"'(\[`*_])"
    r"|\n(?=[ \t]*(?:[-*+][ \t]|\d+[.)][ \t]|\||#))"
)


def word_count(text: str) -> int:
    """Whitespace-separated words, as the seeds count them."""
    return len(text.split())


# C0 and C1 controls (NUL, tab, newline, escape ...) plus the Unicode line and paragraph
# separators: they break log lines and terminals, and a newline inside a part would make
# the seeds' newline-joined identity ambiguous.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_control_character(text: str) -> bool:
    """Whether ``text`` holds a control character or a Unicode line/paragraph separator."""
    return _CONTROL.search(text) is not None


def chunk_point_id(
    version: str, document_id: str, chunk_id: str, tenant: str | None = None
) -> uuid.UUID:
    """Deterministic, injective chunk identity (see the module docstring).

    Untenanted chunks with ordinary ids keep the seeds' ids (identical to the .NET
    sample's Guids); a tenant is part of the identity, so two tenants' documents with the
    same id never share a point.
    """
    parts = (version, document_id, chunk_id)
    if tenant is None and not any(has_control_character(part) for part in parts):
        identity = "\n".join(parts)
    else:
        identity = json.dumps([*parts, tenant], ensure_ascii=False, separators=(",", ":"))
    return uuid.UUID(bytes=hashlib.sha256(identity.encode()).digest()[:16])


TokenCounter = Callable[[str], int]


def build_chunks(
    document: SourceDocument,
    policy: ChunkingPolicy,
    *,
    count_tokens: TokenCounter | None = None,
    token_limit: int | None = None,
) -> list[Chunk]:
    """Cut a validated document into chunks under ``policy``.

    Example:
        >>> from ragwright.types import SourceSection
        >>> doc = SourceDocument("d", "T", "note", "published",
        ...     (SourceSection("s", "Heading", ("One two.", "Three four.")),), "r1")
        >>> [c.chunk_id for c in build_chunks(doc, ChunkingPolicy())]
        ['s/p0']

    Args:
        document: a validated document.
        policy: the chunking policy.
        count_tokens: model tokens of a chunk text *as embedded* (profile formatting
            included); required when ``policy.max_tokens`` is set.
        token_limit: the embedding profile's input limit, enforced with ``count_tokens``.

    Raises:
        ChunkingError: a heading alone exhausts the word budget or the token ceiling.
    """
    if policy.max_words <= 0:
        raise DocumentError(document.document_id, "max_words", "the word budget must be positive")
    if policy.max_tokens is not None and count_tokens is None:
        raise ConfigError("max_tokens", "a token ceiling needs the embedding model's token counter")
    version = policy.version
    ceilings = [c for c in (policy.max_tokens, token_limit) if c is not None]
    ceiling = min(ceilings) if ceilings and count_tokens is not None else None

    def fits_tokens(text: str) -> bool:
        return ceiling is None or count_tokens is None or count_tokens(text) <= ceiling

    chunks: list[Chunk] = []
    for section_index, section in enumerate(document.sections):
        heading_words = word_count(section.heading)
        budget = policy.max_words - heading_words
        if budget <= 0:
            raise ChunkingError(
                document.document_id,
                section.section_id,
                0,
                f"the heading alone has {heading_words} words; the budget of {version} is "
                f"{policy.max_words} words with the heading",
            )
        prefix = section.heading + "\n\n" if section.heading else ""

        def fits(piece: str, prefix: str = prefix) -> bool:
            return fits_tokens(prefix + piece)

        # (block, paragraph it came from, whether it is a piece of a split paragraph)
        pieces: list[tuple[str, int, bool]] = []
        for index, paragraph in enumerate(section.paragraphs):
            parts = split_block(paragraph, budget, fits=fits)
            pieces.extend((part, index, len(parts) > 1) for part in parts)
        blocks: Sequence[str] = [piece for piece, _, _ in pieces]
        # Each split block keeps the page of the paragraph it was cut from.
        block_pages = None if section.pages is None else [section.pages[i] for _, i, _ in pieces]
        start = 0
        while start < len(blocks):
            end = start
            words = heading_words
            while (
                end < len(blocks)
                and words + word_count(blocks[end]) <= policy.max_words
                and fits_tokens(_chunk_text(section.heading, blocks[start : end + 1]))
            ):
                words += word_count(blocks[end])
                end += 1
            if end == start:
                # Every block was split until it fits: only the heading can be in the way.
                tokens = count_tokens(prefix) if count_tokens is not None else 0
                raise ChunkingError(
                    document.document_id,
                    section.section_id,
                    start,
                    f"the heading alone is {tokens} tokens as embedded; with any text it "
                    f"exceeds the ceiling of {ceiling} tokens",
                )
            chunk_id = f"{section.section_id}/p{start}"
            chunks.append(
                Chunk(
                    document_id=document.document_id,
                    chunk_id=chunk_id,
                    point_id=chunk_point_id(
                        version, document.document_id, chunk_id, document.tenant
                    ),
                    chunking_version=version,
                    section_id=section.section_id,
                    heading=section.heading,
                    text=_chunk_text(section.heading, blocks[start:end]),
                    positions=ParagraphPositions(section_index, tuple(range(start, end))),
                    word_count=words,
                    pages=(
                        None
                        if block_pages is None
                        else (min(block_pages[start:end]), max(block_pages[start:end]))
                    ),
                    split=any(cut for _, _, cut in pieces[start:end]),
                )
            )
            start = end - 1 if policy.overlap and end < len(blocks) and end - start > 1 else end
    return chunks


def split_block(block: str, budget: int, fits: Callable[[str], bool] | None = None) -> list[str]:
    """Split one block into pieces of at most ``budget`` words (the block if it fits).

    ``fits`` is an extra test every piece must pass (the token ceiling). Pieces are exact
    substrings of the block (sentences and lines keep their original spacing), except
    fenced code, whose pieces are re-fenced, and a single sentence over the budget, which
    is cut between words.
    """

    def ok(piece: str) -> bool:
        return word_count(piece) <= budget and (fits is None or fits(piece))

    if ok(block):
        return [block]
    match = _FENCE_OPEN.match(block)
    if match:
        return _split_fence(block, match.group(1), ok)
    spans = _unit_spans(block)
    pieces: list[str] = []
    first = 0
    while first < len(spans):
        if not ok(block[spans[first][0] : spans[first][1]]):
            # One sentence alone is over the budget: the last resort cuts it between words.
            pieces.extend(_cut_words(block[spans[first][0] : spans[first][1]], ok))
            first += 1
            continue
        # Longest run of units from ``first`` that fits. Counts grow with the run, so a
        # binary search needs about log2(n) checks where a greedy scan needs n; the piece
        # it picks was itself checked, so it fits whatever the counter.
        low, high = first, len(spans) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if ok(block[spans[first][0] : spans[middle][1]]):
                low = middle
            else:
                high = middle - 1
        pieces.append(block[spans[first][0] : spans[low][1]])
        first = low + 1
    return pieces


def _chunk_text(heading: str, blocks: Sequence[str]) -> str:
    body = "\n\n".join(blocks)
    return heading + "\n\n" + body if heading else body


def _unit_spans(block: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence or line-started item, whitespace excluded."""
    spans: list[tuple[int, int]] = []
    position = 0
    for boundary in _UNIT_BOUNDARY.finditer(block):
        if block[position : boundary.start()].strip():
            spans.append(_trimmed(block, position, boundary.start()))
        position = boundary.end()
    if block[position:].strip():
        spans.append(_trimmed(block, position, len(block)))
    # "1. Run the check" must not lose its list marker to a sentence boundary.
    merged: list[tuple[int, int]] = []
    for span in spans:
        if merged and _LIST_MARKER.fullmatch(block[merged[-1][0] : merged[-1][1]]):
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    return merged


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _split_fence(block: str, marker: str, ok: Callable[[str], bool]) -> list[str]:
    lines = block.split("\n")
    opening = lines[0]
    has_close = len(lines) > 1 and lines[-1].strip().startswith(marker[0] * 3)
    closing = lines[-1] if has_close else marker
    body = lines[1:-1] if has_close else lines[1:]

    def fenced(part: Sequence[str]) -> str:
        return "\n".join([opening, *part, closing])

    if not ok(fenced(["x"])):  # not even one word fits inside the fence lines
        return _cut_words(block, ok)
    pieces: list[str] = []
    current: list[str] = []
    for line in body:
        if not ok(fenced([line])):
            if current:
                pieces.append(fenced(current))
                current = []
            pieces.extend(fenced([part]) for part in _cut_words(line, lambda p: ok(fenced([p]))))
            continue
        if current and not ok(fenced([*current, line])):
            pieces.append(fenced(current))
            current = []
        current.append(line)
    if current:
        pieces.append(fenced(current))
    return pieces


def _cut_words(text: str, ok: Callable[[str], bool]) -> list[str]:
    """Last resort for one sentence or line over the budget: cut between words, greedily;
    a single word that fails ``ok`` alone is cut between characters."""
    pieces: list[str] = []
    current: list[str] = []
    for word in text.split():
        if current and not ok(" ".join([*current, word])):
            pieces.append(" ".join(current))
            current = []
        if not current and not ok(word):
            pieces.extend(_cut_characters(word, ok))
            continue
        current.append(word)
    if current:
        pieces.append(" ".join(current))
    return pieces


def _cut_characters(word: str, ok: Callable[[str], bool]) -> list[str]:
    """A word longer than the budget (a table's separator row, a long URL) as the longest
    prefixes that pass ``ok``, found by binary search; a character that fails alone still
    becomes a piece, so the loop always advances."""
    pieces: list[str] = []
    first = 0
    while first < len(word):
        low, high = first + 1, len(word)
        while low < high:
            middle = (low + high + 1) // 2
            if ok(word[first:middle]):
                low = middle
            else:
                high = middle - 1
        pieces.append(word[first:low])
        first = low
    return pieces

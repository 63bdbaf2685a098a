"""Chunking policies, windows, chunk ids and deterministic point ids.

The default policy is the seeds' ``section-paragraphs`` policy, reproduced exactly:

* complete paragraphs are grouped within one section under a word budget that
  **includes the heading**; words are whitespace-separated tokens;
* each chunk's text is ``heading + "\\n\\n" + "\\n\\n".join(paragraphs)``;
* with overlap on, the next window starts at the previous window's last paragraph,
  but only when that window held at least two paragraphs (so a lone paragraph never
  repeats and the loop always advances);
* windows never cross sections;
* a paragraph that cannot fit beside its heading raises :class:`ChunkingError` naming
  the document, section and paragraph index: nothing is cut silently.

``sentence-blocks`` is a separately versioned policy for prose without usable paragraph
structure (BEIR abstracts, long single-paragraph passages, long procedure lists). Before
windowing it splits every block that cannot fit beside its heading into budget-sized
blocks: prose at sentence ends, lists and tables at line starts, fenced code at line
boundaries with each piece re-fenced so it stays valid Markdown. Only a single sentence
longer than the budget is cut between words. Its block indexes (chunk ids, positions)
count the split blocks.

Chunk identity (the seeds' mapping, byte-for-byte): SHA-256 of the UTF-8 string
``"{version}\\n{document_id}\\n{chunk_id}"``, first 16 bytes read as a big-endian UUID.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence

from ragwright.errors import ChunkingError, DocumentError
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


def chunk_point_id(version: str, document_id: str, chunk_id: str) -> uuid.UUID:
    """The seeds' deterministic chunk identity (identical to the .NET sample's Guids)."""
    identity = f"{version}\n{document_id}\n{chunk_id}".encode()
    return uuid.UUID(bytes=hashlib.sha256(identity).digest()[:16])


def build_chunks(document: SourceDocument, policy: ChunkingPolicy) -> list[Chunk]:
    """Cut a validated document into chunks under ``policy``.

    Example:
        >>> from ragwright.types import SourceSection
        >>> doc = SourceDocument("d", "T", "note", "published",
        ...     (SourceSection("s", "Heading", ("One two.", "Three four.")),), "r1")
        >>> [c.chunk_id for c in build_chunks(doc, ChunkingPolicy())]
        ['s/p0']

    Raises:
        ChunkingError: a block cannot fit beside its heading (seed policy), or a heading
            alone exhausts the budget.
    """
    if policy.max_words <= 0:
        raise DocumentError(document.document_id, "max_words", "the word budget must be positive")
    version = policy.version
    chunks: list[Chunk] = []
    for section_index, section in enumerate(document.sections):
        heading_words = word_count(section.heading)
        if policy.kind == "sentence-blocks":
            budget = policy.max_words - heading_words
            if budget <= 0:
                raise ChunkingError(
                    document.document_id,
                    section.section_id,
                    0,
                    f"the heading alone has {heading_words} words; budget is {policy.max_words}",
                )
            blocks: Sequence[str] = [
                piece
                for paragraph in section.paragraphs
                for piece in split_block(paragraph, budget)
            ]
        else:
            blocks = section.paragraphs
        start = 0
        while start < len(blocks):
            end = start
            words = heading_words
            while end < len(blocks) and words + word_count(blocks[end]) <= policy.max_words:
                words += word_count(blocks[end])
                end += 1
            if end == start:
                raise ChunkingError(
                    document.document_id,
                    section.section_id,
                    start,
                    f"paragraph of {word_count(blocks[start])} words cannot fit with its "
                    f"{heading_words}-word heading under the {policy.max_words}-word budget "
                    f"of {version}",
                )
            chunk_id = f"{section.section_id}/p{start}"
            chunks.append(
                Chunk(
                    document_id=document.document_id,
                    chunk_id=chunk_id,
                    point_id=chunk_point_id(version, document.document_id, chunk_id),
                    chunking_version=version,
                    section_id=section.section_id,
                    heading=section.heading,
                    text=section.heading + "\n\n" + "\n\n".join(blocks[start:end]),
                    positions=ParagraphPositions(section_index, tuple(range(start, end))),
                    word_count=words,
                )
            )
            start = end - 1 if policy.overlap and end < len(blocks) and end - start > 1 else end
    return chunks


def split_block(block: str, budget: int) -> list[str]:
    """Split one block into pieces of at most ``budget`` words (the block if it fits).

    Pieces are exact substrings of the block (sentences and lines keep their original
    spacing), except fenced code, whose pieces are re-fenced, and a single sentence over
    the budget, which is cut between words.
    """
    if word_count(block) <= budget:
        return [block]
    match = _FENCE_OPEN.match(block)
    if match:
        return _split_fence(block, match.group(1), budget)
    spans = _unit_spans(block)
    pieces: list[str] = []
    first = 0
    words = 0
    for index, (start, end) in enumerate(spans):
        unit_words = word_count(block[start:end])
        if unit_words > budget:
            if index > first:
                pieces.append(block[spans[first][0] : spans[index - 1][1]])
            pieces.extend(_cut_words(block[start:end], budget))
            first, words = index + 1, 0
            continue
        if index > first and words + unit_words > budget:
            pieces.append(block[spans[first][0] : spans[index - 1][1]])
            first, words = index, 0
        words += unit_words
    if first < len(spans):
        pieces.append(block[spans[first][0] : spans[-1][1]])
    return pieces


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


def _split_fence(block: str, marker: str, budget: int) -> list[str]:
    lines = block.split("\n")
    opening = lines[0]
    has_close = len(lines) > 1 and lines[-1].strip().startswith(marker[0] * 3)
    closing = lines[-1] if has_close else marker
    body = lines[1:-1] if has_close else lines[1:]
    frame = word_count(opening) + word_count(closing)
    room = budget - frame
    if room <= 0:
        return _cut_words(block, budget)
    pieces: list[str] = []
    current: list[str] = []
    current_words = 0
    for line in body:
        words = word_count(line)
        if words > room:
            if current:
                pieces.append("\n".join([opening, *current, closing]))
                current, current_words = [], 0
            pieces.extend("\n".join([opening, part, closing]) for part in _cut_words(line, room))
            continue
        if current and current_words + words > room:
            pieces.append("\n".join([opening, *current, closing]))
            current, current_words = [], 0
        current.append(line)
        current_words += words
    if current:
        pieces.append("\n".join([opening, *current, closing]))
    return pieces


def _cut_words(text: str, size: int) -> list[str]:
    """Last resort for one sentence or line longer than the budget: cut between words."""
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]

"""Evidence split into sentences with stable sub-labels (``S1.1``, ``S1.2``, …).

Quoted answers and evidence-only results are made of whole evidence sentences, so each
sentence needs an identity the model can name and the caller can check. A source's
sentences are numbered in reading order from 1 under the source's assembly label: the
third sentence of ``S2`` is ``S2.3`` whatever subset of sentences a request shows, so a
label means the same text in the request, the answer and the audit record.

A sentence is read as a person reads the rendered text, not as the file stores it.
Much documentation hard-wraps its paragraphs at about 80 columns, and the splitter
(``pipeline.answerability.split_sentences``, rule-based, in production) ends a sentence
at every line break: "set to⏎`/dev/null`. As a result, ..." became "set to" and
"`/dev/null`." So the included text is first read into blocks, Markdown's way:

* a paragraph's lines (its soft and hard line breaks, inline code included) are joined
  with a space, then split into sentences; a list item or a block quote is read on its
  own, its marker (``-``, ``1.``, ``>``) left out;
* a heading line (``### Disable admin user``, or a Setext underline's text) is no
  sentence: it labels what follows and says nothing itself;
* a code block's lines (fenced or indented) and a table's rows are a sentence each,
  never joined and never split (a row's cells read ``a | b``); fences, table delimiter
  rows, rules and link definitions are no text;
* inside a sentence, emphasis and strike-through markers are left out, a link
  or image reads as its text (``[text](url)`` → ``text``), an autolink as its address,
  a backslash escape as the character; inline code (backticks included) stays as
  written, so a quote keeps every word of the source in order, only the Markdown
  syntax around them removed.

A sentence never spans a paragraph break (a blank line). Whitespace around a sentence
is dropped; the marker assembly puts on a cut fragment (``[...]``) is not part of any
sentence. Plain text (PDF, Word, text files) reads the same: its wrapped lines are
joined, its lists are items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ragwright.core.assembly import CUT_MARK, EVIDENCE_KIND, SelectedSource, Turn


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    """One sentence of one admitted source: its sub-label, the source's label, the text
    as a person reads it (line breaks joined, Markdown syntax left out), and the number
    of its paragraph in the source (from 1; 0 when not known)."""

    label: str
    source: str
    text: str
    paragraph: int = 0


SentenceSplitter = Callable[[str], list[str]]
"""Text → its sentences in order, stripped, none empty (``pipeline.answerability``
provides the rule-based one; core stays free of third-party code)."""


def evidence_sentences(
    sources: Sequence[SelectedSource], split: SentenceSplitter
) -> tuple[EvidenceSentence, ...]:
    """Every sentence of the included text of ``sources``, labelled ``<source>.<n>``.

    The text is read into blocks first (the module docstring: wrapped lines joined,
    headings, fences and Markdown syntax left out); ``split`` is applied to each
    paragraph's joined text separately (a sentence never spans a paragraph break); the
    marker of a cut fragment (``[...]``) is not part of any sentence. A caller leaves out
    the sources the instruction screen takes (``core.screen.screened_sources``): the
    others keep their numbers.

    Example:
        >>> from ragwright.core.assembly import Candidate
        >>> c = Candidate("d", "s/p0", "v1", "s", "T", "H", "H\\n\\nOne. Two.", 1.0)
        >>> source = SelectedSource("S1", c, "One. **Two**\\nlines.\\n\\n### Next\\nThree.")
        >>> by_dot = lambda text: [p.strip() + "." for p in text.split(".") if p.strip()]
        >>> [(s.label, s.text) for s in evidence_sentences([source], by_dot)]
        [('S1.1', 'One.'), ('S1.2', 'Two lines.'), ('S1.3', 'Three.')]
    """
    return tuple(
        EvidenceSentence(f"{source.label}.{number}", source.label, sentence, paragraph)
        for source in sources
        for number, (sentence, paragraph) in enumerate(
            _sentences(source.included_text, split), start=1
        )
    )


def _sentences(text: str, split: SentenceSplitter) -> list[tuple[str, int]]:
    if text.endswith(CUT_MARK):
        text = text[: -len(CUT_MARK)]
    found: list[tuple[str, int]] = []
    for block in _blocks(text):
        if block.kind in ("text", "item"):
            # Split with its code spans set aside: a boundary is never inside one (pysbd
            # would end a sentence at the "." of "`./prometheus`").
            reading = _Reading.of(" ".join(_unbroken(line) for line in block.lines))
            found.extend((reading.restored(s), block.paragraph) for s in split(reading.text))
        elif block.kind == "row":
            reading = _Reading.of(block.lines[0], row=True)
            found.append((reading.restored(reading.text), block.paragraph))
        else:
            found.append((block.lines[0].strip(), block.paragraph))
    return [(sentence, paragraph) for sentence, paragraph in found if sentence]


def render_sentences(
    sources: Sequence[SelectedSource],
    shown: Sequence[EvidenceSentence],
    question: str,
    history: Sequence[Turn] = (),
) -> str:
    """The user message of a quoted request: each source that has a shown sentence, with
    those sentences under their sub-labels, then the question. Sources and sentences keep
    the order of ``shown`` (a source comes where its first sentence is), so a caller that
    ranks them shows its best first.

    ``{"evidence": [{id, kind, title, heading, sentences: [{id, text}]}], "question"}``
    (with a ``"history"`` block before the question when earlier turns are included).
    """
    by_source: dict[str, list[EvidenceSentence]] = {}
    for sentence in shown:
        by_source.setdefault(sentence.source, []).append(sentence)
    by_label = {source.label: source for source in sources}
    body: dict[str, object] = {
        "evidence": [
            {
                "id": source.label,
                "kind": EVIDENCE_KIND,
                "title": source.candidate.title,
                "heading": source.candidate.heading,
                "sentences": [{"id": s.label, "text": s.text} for s in by_source[source.label]],
            }
            for source in (by_label[label] for label in by_source)
        ]
    }
    if history:
        body["history"] = [{"question": t.question, "answer": t.answer} for t in history]
    body["question"] = question
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _position(label: str) -> tuple[int, int]:
    """``S2.10`` → (2, 10): sources in label order, sentences in reading order."""
    source, number = label[1:].split(".")
    return int(source), int(number)


def in_reading_order(sentences: Sequence[EvidenceSentence]) -> list[EvidenceSentence]:
    """``sentences`` sorted by source label number, then position in the source."""
    return sorted(sentences, key=lambda s: _position(s.label))


# --- blocks -----------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INDENTED = re.compile(r"^(?: {4}|\t)")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?")
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_RULE = re.compile(r"^ {0,3}([-*_=])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[(?!\^)[^\]]+\]:[ \t]*\S")


@dataclass(slots=True)
class _Block:
    """Lines read together: a paragraph's or a list item's (``text``, ``item``: joined,
    then split), a code line or a table row (``code``, ``row``: one sentence each)."""

    kind: Literal["text", "item", "code", "row"]
    paragraph: int
    lines: list[str]
    depth: int = 0  # of block quote markers


def _blocks(text: str) -> list[_Block]:
    """The blocks of ``text`` in reading order, each with its paragraph number (a run of
    non-blank lines; a fenced code block is one)."""
    blocks: list[_Block] = []
    paragraph = 0
    starts = True  # the next non-blank line opens a paragraph
    fence, fence_depth = "", 0  # the opening fence while inside a fenced code block
    indented = table = listed = False
    open_text: _Block | None = None  # the block a continuation line joins
    for raw in text.split("\n"):
        line, depth = raw, 0
        while (not fence or depth < fence_depth) and (marker := _QUOTE.match(line)):
            line, depth = line[marker.end() :], depth + 1
        if fence:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
            elif line.strip():
                blocks.append(_Block("code", paragraph, [line]))
            continue
        if not line.strip():
            starts, open_text, indented, table = True, None, False, False
            continue
        if starts:
            paragraph, starts = paragraph + 1, False
            # Indented lines after a list item continue it; elsewhere they are code.
            indented = bool(_INDENTED.match(line)) and not listed
            listed = listed and line[:1] in (" ", "\t")
        if depth and open_text is not None and open_text.depth != depth:
            open_text = None  # a line without ">" continues a quote lazily, as Markdown
        if indented and _INDENTED.match(line):
            blocks.append(_Block("code", paragraph, [line]))
            continue
        indented = False
        header = _single_line(open_text, paragraph)
        if fenced := _FENCE.match(line):
            fence, fence_depth, open_text = fenced.group(1), depth, None
        elif _LINK_DEFINITION.match(line) or _HEADING.match(line):
            open_text = None
        elif rule := _RULE.match(line):
            if rule.group(1) in "=-" and header is not None:
                blocks.remove(header)  # a Setext heading's text: a label, no sentence
            open_text = None
        elif "|" in line and _TABLE_DELIMITER.match(line):
            if header is not None:
                header.kind = "row"
            table, open_text = True, None
        elif table or line.lstrip().startswith("|"):
            blocks.append(_Block("row", paragraph, [line]))
            open_text = None
        elif item := _LIST_ITEM.match(line):
            open_text, listed = _Block("item", paragraph, [line[item.end() :]], depth), True
            blocks.append(open_text)
        elif open_text is not None:
            open_text.lines.append(line)
        else:
            open_text = _Block("text", paragraph, [line], depth)
            blocks.append(open_text)
    return blocks


def _single_line(block: _Block | None, paragraph: int) -> _Block | None:
    """``block`` when it is one line of text opened in ``paragraph``: a heading's or a
    table header's line, should the line after it say so."""
    if block is None or block.kind != "text" or block.paragraph != paragraph:
        return None
    return block if len(block.lines) == 1 else None


def _unbroken(line: str) -> str:
    """A line without its indentation and its hard break (a trailing backslash)."""
    line = line.strip()
    return line[:-1].rstrip() if line.endswith("\\") else line


# --- inline syntax ----------------------------------------------------------------------

# One backtick each side, as documentation writes inline code; tokenised corpora open a
# quotation with a double one (``Benvolio''), which must stay visible to the splitter.
_CODE_SPAN = re.compile(r"(?<!`)`(?!`)[^`\n]+(?<!`)`(?!`)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_PLACEHOLDER = re.compile("\ue000([0-9]+)\ue001")
_LINK = re.compile(
    r"!?\[([^\[\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
_REFERENCE_LINK = re.compile(r"!?\[([^\[\]\n]+)\]\[[^\[\]\n]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^\s<>]+|mailto:[^\s<>]+)>")
# Delimiters must not touch a word on their outer side: snake_case_names and 2*3*4 are
# text, not emphasis.
_EMPHASIS = (
    re.compile(r"(?<![\w*])(\*{1,3})(?=[^\s*])(.+?)(?<=[^\s*])\1(?![\w*])"),
    re.compile(r"(?<![\w_])(_{1,3})(?=[^\s_])(.+?)(?<=[^\s_])\1(?![\w_])"),
    re.compile(r"(?<!~)(~~)(?=[^\s~])(.+?)(?<=[^\s~])~~(?!~)"),
)


@dataclass(frozen=True, slots=True)
class _Reading:
    """A block's text as it reads rendered: links, images and autolinks as their text,
    emphasis and strike-through without their markers, escapes as the character, runs
    of whitespace as one space; code spans exactly as written, set aside as placeholders
    (``kept``) so that neither these rules nor a splitter reads inside them."""

    text: str
    kept: tuple[str, ...]

    @classmethod
    def of(cls, text: str, *, row: bool = False) -> _Reading:
        """``text`` read; a table ``row``'s cells joined by `` | ``."""
        kept: list[str] = []

        def keep(value: str) -> str:
            kept.append(value)
            return f"\ue000{len(kept) - 1}\ue001"

        text = _CODE_SPAN.sub(lambda m: keep(m.group(0)), text)
        text = _ESCAPE.sub(lambda m: keep(m.group(1)), text)
        if row:
            text = " | ".join(text.strip().strip("|").split("|"))
        text = _AUTOLINK.sub(r"\1", text)
        # Nested syntax ([![alt](img)](url), **a *b* c**) comes off layer by layer.
        previous = None
        while previous != text:
            previous = text
            text = _REFERENCE_LINK.sub(r"\1", _LINK.sub(r"\1", text))
            for pattern in _EMPHASIS:
                text = pattern.sub(r"\2", text)
        return cls(" ".join(text.split()), tuple(kept))

    def restored(self, part: str) -> str:
        """``part`` of :attr:`text` (a sentence) with what was set aside put back."""
        return _PLACEHOLDER.sub(lambda m: self.kept[int(m.group(1))], part).strip()

"""Evidence split into sentences with stable sub-labels (``S1.1``, ``S1.2``, …).

Quoted answers and evidence-only results are made of whole evidence sentences, so each
sentence needs an identity the model can name and the caller can check. A source's
sentences are numbered in reading order from 1 under the source's assembly label: the
third sentence of ``S2`` is ``S2.3`` whatever subset of sentences a request shows, so a
label means the same text in the request, the answer and the audit record.

Boundaries come from a splitter passed in (``pipeline.answerability.split_sentences``,
rule-based, in production), applied to each paragraph separately so a sentence never
spans a paragraph break. Whitespace around a sentence is dropped; the marker assembly
puts on a cut fragment (``[...]``) is not part of any sentence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragwright.core.assembly import CUT_MARK, EVIDENCE_KIND, SelectedSource, Turn


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    """One sentence of one admitted source: its sub-label, the source's label, the text,
    and the number of its paragraph in the source (from 1; 0 when not known)."""

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

    ``split`` is applied to each paragraph separately (a sentence never spans a paragraph
    break); the marker of a cut fragment (``[...]``) is not part of any sentence. A
    caller leaves out the sources the instruction screen takes
    (``core.screen.screened_sources``): the others keep their numbers.

    Example:
        >>> from ragwright.core.assembly import Candidate
        >>> c = Candidate("d", "s/p0", "v1", "s", "T", "H", "H\\n\\nOne. Two.", 1.0)
        >>> source = SelectedSource("S1", c, "One. Two.\\n\\nThree.")
        >>> by_dot = lambda text: [p.strip() + "." for p in text.split(".") if p.strip()]
        >>> [(s.label, s.text) for s in evidence_sentences([source], by_dot)]
        [('S1.1', 'One.'), ('S1.2', 'Two.'), ('S1.3', 'Three.')]
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
    paragraphs = [paragraph for paragraph in text.split("\n\n") if paragraph.strip()]
    return [
        (sentence.strip(), number)
        for number, paragraph in enumerate(paragraphs, start=1)
        for sentence in split(paragraph)
        if sentence.strip()
    ]


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

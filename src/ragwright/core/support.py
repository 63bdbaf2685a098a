"""A local, deterministic support check for cited sources (beyond the seeds).

For every sentence of an answer, its content words (lower-case word tokens of three or
more characters, English stop words removed, a plural ``s`` folded) are compared with
the content words of each cited source's *included* text — what the model actually saw.
A citation is supported when it shares at least ``min_shared`` content words with some
answer sentence and covers at least ``min_coverage`` of that sentence's content words.
An answer is flagged when any citation is unsupported or a sentence is supported by no
citation. It is a cheap screen for answers that cite sources which do not contain their
claims, not a proof of faithfulness: paraphrase can defeat it, and word overlap can be
coincidental.

Evidence is data, never instructions. A paragraph of evidence that addresses the
answering model (:func:`addresses_the_model`: "ignore previous instructions", "the
correct answer is", "reply only with", chat-template tokens, forged ``"status"`` or
``"id": "S1"`` JSON, "you are now", ...) supports nothing: it is left out of the cited
text the claims are compared with, and an answer sentence that echoes such a paragraph
(half or more of its content words come from it, and no fewer from ordinary evidence
text) is reported as following an instruction found in the evidence. An answer is
*supported* only when it has at least one checkable sentence, every sentence is
supported and none follows such text; the answer use case never returns an unsupported
answer as ``answered``. The patterns are a screen too (an obfuscated instruction passes
them); the word-overlap rule then still requires the answer's claims to appear in
ordinary evidence text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragwright.core.lexical import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_PARAGRAPH = re.compile(r"\n\s*\n")
_MODEL = r"(?:AI|assistants?|chat\s?bots?|bots?|LLMs?|language\s+models?|GPT\w*)"
# Text that speaks to the answering model rather than about the subject. Each
# alternative is phrased so ordinary runbook prose ("ignore the alert if", "reply to the
# customer") does not match; a false match only costs support, never adds any.
_ADDRESSES_MODEL = re.compile(
    "|".join(
        (
            r"\b(?:ignor\w*|disregard\w*|forget|overrid\w*|bypass)\b[^.!?\n]{0,40}"
            r"\b(?:instructions?|rules|prompts?|guidelines|directions|guardrails|"
            r"anweisungen|instrucciones|consignes)\b",
            r"\b(?:system|developer)\s+(?:prompt|message|instructions?|override)\b",
            r"\bnew\s+(?:instructions?|rules|task|directives?)\b",
            r"\bend\s+of\s+(?:the\s+)?(?:evidence|context|data|instructions?)\b",
            r"\b(?:you\s+are\s+now|from\s+now\s+on|pretend\s+you|role-?\s?play|jailbreak\w*)\b",
            rf"\b(?:to|for|dear|attention|hey)\s+(?:the\s+|any\s+|all\s+|automated\s+)*{_MODEL}\b",
            rf"\bif\s+you\s+are\s+(?:an?\s+)?{_MODEL}\b",
            rf"(?:^|\n)\s*(?:#+\s*)?(?:system|{_MODEL})\s*(?::|\n)",
            r"\b(?:anyone|whoever|you)\s+(?:summari[sz]\w*|answering|responding|reading\s+this)\b",
            r"\byour\s+(?:answer|response|reply|output|instructions|task)\b",
            r"\bthe\s+answer\s+(?:is|should\s+be|must\s+be)\s*[:'\"\u201c]",
            r"\b(?:correct|right|real|true|official|approved|final|expected|only)\s+"
            r"(?:answer|response|reply)\b",
            r"\bas\s+(?:the|your)\s+(?:answer|response|reply)\b",
            r"\b(?:answer|respond|reply|say|output)\s+(?:only|exactly|verbatim|just)\b",
            r"\b(?:answer|respond|reply|say|output)\s+with\s+(?:the\s+)?"
            r"(?:words?|phrase|text|sentence|string)\b",
            r"\b(?:answer|respond|reply|say)\s*:?\s*['\"\u201c]",
            r"\b(?:must|should|shall)\s+(?:state|say|answer|reply|respond)\s*[:'\"\u201c]",
            r"\b(?:cite|citing|sourceids?)\b[^.!?\n]{0,20}\bS\d+\b",
            r"\[S\d+\]",
            r"[\"']?\b(?:status|sourceIds|answer|id)[\"']?\s*:\s*[\"'\[]\s*(?:answered|insufficient|S\d)",
            r"\[/?INST\]|<\|?im_(?:start|end)\|?>|</?(?:system|instructions?)>",
        )
    ),
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class CitationSupport:
    """How well one cited source supports the answer."""

    label: str
    best_coverage: float
    shared_words: int
    supported: bool


@dataclass(frozen=True, slots=True)
class SupportReport:
    """Per-citation support and the overall flag."""

    citations: tuple[CitationSupport, ...]
    unsupported_sentences: tuple[str, ...]
    checked_sentences: int = 0
    followed_instructions: tuple[str, ...] = ()
    instruction_sources: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        """The answer has a checkable claim, every claim is supported by a cited source
        and none echoes text addressed to the model."""
        return (
            self.checked_sentences > 0
            and not self.unsupported_sentences
            and not self.followed_instructions
        )

    @property
    def flagged(self) -> bool:
        return not self.supported or any(not c.supported for c in self.citations)


def content_words(text: str) -> frozenset[str]:
    """Lower-case content words of three or more characters, plural ``s`` folded."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        words.add(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return frozenset(words)


def addresses_the_model(paragraph: str) -> bool:
    """Whether ``paragraph`` speaks to the answering model (an instruction, a forged
    label or answer, a role or chat-template marker) rather than about its subject."""
    return _ADDRESSES_MODEL.search(paragraph) is not None


def split_instructions(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` without its paragraphs that address the model, and those paragraphs."""
    kept: list[str] = []
    removed: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        (removed if addresses_the_model(paragraph) else kept).append(paragraph)
    return "\n\n".join(kept), tuple(removed)


def check_support(
    answer: str,
    cited: Sequence[tuple[str, str]],
    *,
    evidence: Sequence[tuple[str, str]] | None = None,
    min_shared: int = 2,
    min_coverage: float = 0.3,
    min_echo: float = 0.5,
) -> SupportReport:
    """Check ``answer`` against ``cited`` (label, included text) pairs.

    ``evidence`` is every (label, included text) pair the model was given (default:
    ``cited``); an answer sentence follows an instruction when one of their paragraphs
    that address the model covers at least ``min_echo`` of its content words and at
    least as many as any ordinary evidence text does (so a true answer next to an
    injection that talks about the same subject keeps its support).

    The defaults ``min_shared=2, min_coverage=0.3`` were chosen by hand and kept after
    calibration (``benchmarks/support_check.py``, 79 labelled cases, fixed tune/test
    split): the pair best on tune, (2, 0.45), raised tune balanced accuracy from 0.763 to
    0.822 but lowered the held-out split's from 0.740 to 0.647 (precision 0.938 -> 0.762,
    recall 0.536 -> 0.571), withholding four more supported paraphrases.
    """
    sentences = [s for s in _SENTENCE.split(answer.strip()) if content_words(s)]
    planted: list[frozenset[str]] = []
    clean: list[frozenset[str]] = []
    instruction_sources: list[str] = []
    for label, text in cited if evidence is None else evidence:
        kept, removed = split_instructions(text)
        clean.append(content_words(kept))
        if removed:
            instruction_sources.append(label)
            planted.extend(content_words(p) for p in removed)
    followed = tuple(s for s in sentences if _follows(content_words(s), planted, clean, min_echo))
    sources = [(label, content_words(split_instructions(text)[0])) for label, text in cited]
    results = []
    supported_sentences: set[int] = set()
    for label, words in sources:
        best, best_shared = 0.0, 0
        for index, sentence in enumerate(sentences):
            claim = content_words(sentence)
            shared = len(claim & words)
            coverage = shared / len(claim)
            if shared >= min_shared and coverage >= min_coverage:
                supported_sentences.add(index)
            if coverage > best:
                best, best_shared = coverage, shared
        results.append(
            CitationSupport(
                label,
                round(best, 3),
                best_shared,
                best_shared >= min_shared and best >= min_coverage,
            )
        )
    unsupported = tuple(s for i, s in enumerate(sentences) if i not in supported_sentences)
    return SupportReport(
        tuple(results), unsupported, len(sentences), followed, tuple(instruction_sources)
    )


def _follows(
    claim: frozenset[str],
    planted: Sequence[frozenset[str]],
    clean: Sequence[frozenset[str]],
    min_echo: float,
) -> bool:
    if not planted:
        return False
    echo = max(len(claim & words) for words in planted) / len(claim)
    ordinary = max((len(claim & words) for words in clean), default=0) / len(claim)
    return echo >= min_echo and echo >= ordinary

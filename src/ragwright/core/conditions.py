"""The conditions and exceptions that govern a chosen sentence.

A runbook rarely states a rule in one sentence: "Drain the remaining jobs only while the
shutdown deadline allows it." is followed by "If the deadline expires, cancel the
in-flight I/O ...". An answer made of the first sentence alone tells a reader to drain and
leaves out what to do when draining must stop. So whatever chose an answer's sentences (the
model, or the deterministic evidence selection), the sentences right after a chosen one in
the same paragraph are added when they qualify it: they open with a conditional or
contrasting word ("If", "Unless", "Otherwise", "Only", "Except", "But", "However", "When the
deadline expires") or carry an exception inside ("unless", "except", "only if", "as long
as", "must not", "never").

The rule is lexical on purpose: it is cheap, repeatable and explainable ("added because it
opens with 'If'"), and it only ever adds a verbatim sentence of a source the answer already
cites, so a citation never points at text the reader did not get. It is English only, like
the sentence splitter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragwright.core.sentences import EvidenceSentence, in_reading_order

MAX_CONDITIONS_PER_SENTENCE = 2
"""Following sentences that may be added after one chosen sentence (a chain such as
"If A, do B. Otherwise, do C.")."""

_OPENERS = re.compile(
    r"^\W*(if|unless|otherwise|only|except|provided|but|however|until|in case|"
    r"as long as|in that case|else|instead|never|do not|don't|must not)\b",
    re.IGNORECASE,
)
_EXPIRY = re.compile(
    r"^\W*(when|once|after|before|while)\b.{0,80}\b(expire[sd]?|fail[sn]?|failed|exceed[sn]?|"
    r"exceeded|times? out|timed out|run[s]? out|is full|are full|is reached|is spent|"
    r"is missing|is down|is unavailable|is not|are not|cannot)\b",
    re.IGNORECASE,
)
_INSIDE = re.compile(
    r"\b(unless|except|otherwise|only if|only when|only while|only after|provided that|"
    r"as long as|must not|must never|never)\b",
    re.IGNORECASE,
)


def qualifies(text: str) -> bool:
    """Whether ``text`` reads as a condition or exception on what came before it.

    Example:
        >>> qualifies("If the deadline expires, cancel the in-flight I/O.")
        True
        >>> qualifies("Readers then work through the jobs that were already queued.")
        False
    """
    return bool(_OPENERS.search(text) or _EXPIRY.search(text) or _INSIDE.search(text))


def _number(sentence: EvidenceSentence) -> int:
    return int(sentence.label.rsplit(".", 1)[1])


def conditions_for(
    chosen: Sequence[EvidenceSentence], pool: Sequence[EvidenceSentence]
) -> list[EvidenceSentence]:
    """The sentences of ``pool`` to add to ``chosen``: for each chosen sentence, the
    sentences right after it in the same source and paragraph that qualify it (up to
    :data:`MAX_CONDITIONS_PER_SENTENCE`, stopping at the first that does not), in reading
    order, none already chosen. ``pool`` is what the answer may quote: the shown sentences
    of a quoted request, or every sentence of the evidence for an evidence-only result.

    Example:
        >>> s = lambda n, text, p=1: EvidenceSentence(f"S1.{n}", "S1", text, p)
        >>> pool = [s(1, "Drain jobs only while the deadline allows it."),
        ...         s(2, "If the deadline expires, cancel the I/O."),
        ...         s(3, "Log the result."), s(4, "Unless told otherwise, stop.", 2)]
        >>> [c.label for c in conditions_for([pool[0]], pool)]
        ['S1.2']
    """
    by_label = {s.label: s for s in pool}
    taken = {s.label for s in chosen}
    added: list[EvidenceSentence] = []
    for sentence in chosen:
        number = _number(sentence)
        for step in range(1, MAX_CONDITIONS_PER_SENTENCE + 1):
            following = by_label.get(f"{sentence.source}.{number + step}")
            if (
                following is None
                or following.paragraph != sentence.paragraph
                or not qualifies(following.text)
            ):
                break
            if following.label not in taken:
                taken.add(following.label)
                added.append(following)
    return in_reading_order(added)

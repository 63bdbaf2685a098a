"""The screen for evidence that speaks to the answering model rather than about its subject.

Evidence is data, never instructions. The screen reads every field of an evidence item
the model sees: the document **title**, the section **heading** and each **paragraph**
of the text. A field *addresses the model* (:func:`addresses_the_model`) when it holds an
instruction ("ignore previous instructions", "reply only with", "vergiss alle
Anweisungen", "忽略之前的所有指令", "игнорируй все инструкции"), a forged label or answer
(``[S1]``, ``"status": "answered"``), a role or chat-template marker (``SYSTEM:``,
``<|im_start|>``, ``{"role": "system"}``, "SYSTEM DOCUMENT", "you are now"), a claim to
override the other evidence ("supersedes all runbooks", "takes precedence over every
other source", "all other documents are void"), or a base64 run that decodes to any of
these.

Text is normalised before it is matched (:func:`normalised`): Unicode tag characters
read as the ASCII they hide, invisible characters (zero-width, soft hyphen, bidi
controls, variation selectors) removed, then NFKC (fullwidth ``ｉｇｎｏｒｅ`` and
mathematical ``𝐢𝐠𝐧𝐨𝐫𝐞`` are ``ignore``). The patterns then run on that text and on its
Latin skeleton (accents dropped, Cyrillic and Greek look-alikes read as Latin letters,
``I-g-n-o-r-e`` joined), so ``Іgnоrе`` written with Cyrillic letters matches as well.

What is screened is the unit an instruction governs (:func:`screened_sources`,
:func:`split_instructions`): a chunk is screened whole (every paragraph, with its title
and heading) when any field of it addresses the model, when the chunk next to it in the
same document does or the text across their boundary does (an instruction in one chunk
and its payload in the next is caught whichever is cited), and when any chunk of the
same document claims the system role or authority over the rest (:func:`claims_authority`:
such a document is screened by its content, as a title doing so screens it). Screened
text supports nothing and cannot be quoted; the support check
(:mod:`ragwright.core.support`) reports an answer that echoes it.

The patterns are English, German, French, Spanish, Portuguese, Italian, Russian, Chinese
(simplified and traditional), Japanese and Korean, phrased so that ordinary runbook prose
("ignore the alert if", "reply to the customer", "the system: overview", "this runbook
supersedes the 2023 one") does not match; a false match costs support, never adds any.
They are a screen, not a proof: another language, another encoding (hex, rot13, base64
split by spaces) or an instruction phrased without any of these forms passes them, and
the word-overlap rule of the support check must then catch the answer.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence

from ragwright.core.assembly import CUT_MARK, SelectedSource
from ragwright.core.screen_patterns import CLAIMS_AUTHORITY, INSTRUCTS

# --- Normalisation -----------------------------------------------------------------

# Unicode tag characters (U+E0020-U+E007E) mirror printable ASCII and render as nothing:
# text hidden in them is read as the ASCII it encodes.
_TAG_TO_ASCII = {code: code - 0xE0000 for code in range(0xE0020, 0xE007F)}
# Default_Ignorable_Code_Point (UAX #44, DerivedCoreProperties.txt) less the tags read
# above: soft hyphen, combining grapheme joiner, Arabic letter mark, Hangul fillers,
# Mongolian and other variation selectors, zero-width space/joiners, bidi marks and
# embeddings, word joiner and invisible operators, BOM, shorthand format controls.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Look-alike letters read as the Latin letter they imitate, for the Latin skeleton only
# (Russian and Greek text is also matched as written). A table of the Cyrillic, Greek,
# Armenian and Latin-extension letters that UTS #39's confusables.txt maps to a single
# ASCII letter, rather than a library: the core imports only the standard library
# (tests/test_imports.py), and the packages on PyPI either detect confusables without
# mapping them (confusable-homoglyphs) or expand every spelling of a word (confusables,
# unmaintained since 2021). Fullwidth and mathematical letters need no table: NFKC
# folds them.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic.
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
        "к": "k", "м": "m", "н": "h", "о": "o", "п": "n", "р": "p", "с": "c", "т": "t",
        "у": "y", "х": "x", "ѕ": "s", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ү": "y",
        "ӏ": "l", "ɡ": "g",
        "А": "A", "В": "B", "Е": "E", "Ё": "E", "І": "I", "Ї": "I", "Ј": "J", "К": "K",
        "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y", "Х": "X",
        "Ѕ": "S", "Һ": "H", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y", "Ӏ": "I",
        # Greek.
        "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
        "υ": "u", "χ": "x", "γ": "y", "ϲ": "c", "ϳ": "j",
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
        # Armenian and Latin extensions.
        "օ": "o", "ս": "u", "ո": "n", "հ": "h", "ı": "i", "ȷ": "j", "ɑ": "a", "ɩ": "i",
        "ʏ": "y", "ℓ": "l",
    }
)  # fmt: skip
# Single letters joined by a separator ("I-g-n-o-r-e", "p.r.e.v.i.o.u.s").
_SPACED_LETTERS = re.compile(r"(?<!\w)(?:\w[-._*·•|]){2,}\w(?!\w)")
_SPACER = re.compile(r"[-._*·•|]")


def normalised(text: str) -> str:
    """``text`` as the screen reads it: tag characters as ASCII, invisible characters
    removed, NFKC (fullwidth, compatibility and mathematical forms folded).

    >>> normalised("ｉｇｎｏｒｅ pre\\u00advi\\u200bous")
    'ignore previous'
    """
    if text.isascii():
        return text
    text = _IGNORABLE.sub("", text.translate(_TAG_TO_ASCII))
    return unicodedata.normalize("NFKC", text)


def skeleton(text: str) -> str:
    """The Latin skeleton of normalised ``text``: accents dropped, look-alike letters
    read as Latin, letters joined by separators joined.

    >>> skeleton("Іgnоrе I-g-n-o-r-e")
    'Ignore Ignore'
    """
    if not text.isascii():
        decomposed = unicodedata.normalize("NFD", text)
        text = "".join(c for c in decomposed if not unicodedata.combining(c))
        text = text.translate(_LOOKALIKES)
    return _SPACED_LETTERS.sub(lambda m: _SPACER.sub("", m.group(0)), text)


# Written in lower case and matched against lower-cased text, one pattern at a time:
# over SciFact abstracts that is about twice as fast as one IGNORECASE alternation.
_AUTHORITY = tuple(re.compile(p) for p in CLAIMS_AUTHORITY)
_ADDRESSES_MODEL = (*(re.compile(p) for p in INSTRUCTS), *_AUTHORITY)
_PARAGRAPH = re.compile(r"\n\s*\n")
# A run of base64 (standard or URL-safe alphabet) long enough to hold a sentence.
_BASE64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")


@functools.lru_cache(maxsize=1024)
def _forms(field: str) -> tuple[str, ...]:
    """The lower-cased texts the patterns read for ``field``: normalised, its skeleton
    when that differs, and both for every base64 run that decodes to text. Cached: one
    answer screens the same fields for its quoted sentences, its support check and each
    source's neighbours."""
    text = normalised(field)
    forms = []
    for reading in (text, *decoded_runs(text)):
        forms.append(reading.lower())
        latin = skeleton(reading)
        if latin != reading:
            forms.append(latin.lower())
    return tuple(forms)


def _matches(patterns: Sequence[re.Pattern[str]], field: str) -> bool:
    return any(p.search(form) is not None for form in _forms(field) for p in patterns)


def addresses_the_model(field: str) -> bool:
    """Whether ``field`` (a paragraph, heading or title) speaks to the answering model (an
    instruction, a forged label or answer, a role or chat-template marker, a claim to
    override the other evidence), in plain text, in disguised letters or in a base64 run
    that decodes to one."""
    return _matches(_ADDRESSES_MODEL, field)


def claims_authority(field: str) -> bool:
    """Whether ``field`` claims the system role or authority over the rest of the
    evidence ("SYSTEM DOCUMENT", ``{"role": "system"}``, "you are now", "supersedes all
    runbooks"): such a claim governs every chunk of its document."""
    return _matches(_AUTHORITY, field)


def decoded_runs(text: str) -> list[str]:
    """The base64 runs of ``text`` that decode to readable UTF-8 text (a hash, a key or
    random bytes decode to something else and are left alone)."""
    decoded = []
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        padded = run + "=" * (-len(run) % 4)
        try:
            raw = (
                base64.urlsafe_b64decode(padded)
                if "-" in run or "_" in run
                else base64.b64decode(padded, validate=True)
            )
            plain = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        printable = sum(c.isprintable() or c.isspace() for c in plain)
        if " " in plain and printable >= 0.95 * len(plain):
            decoded.append(plain)
    return decoded


def frame_addresses_the_model(title: str, heading: str) -> bool:
    """Whether the title or the heading of an evidence item addresses the model."""
    return addresses_the_model(title) or addresses_the_model(heading)


def _paragraphs(text: str) -> list[str]:
    return [p for p in _PARAGRAPH.split(text) if p.strip()]


def _fields(text: str, title: str, heading: str) -> list[str]:
    """Every field of a chunk the model reads, and its text as one run (an instruction
    spread over two paragraphs is matched across the break)."""
    paragraphs = _paragraphs(text)
    joined = [" ".join(paragraphs)] if len(paragraphs) > 1 else []
    return [title, heading, *paragraphs, *joined]


def split_instructions(
    text: str, *, title: str = "", heading: str = "", screened: bool = False
) -> tuple[str, tuple[str, ...]]:
    """``text`` without what addresses the model, and what was taken out.

    An instruction governs the text around it: when the ``title``, the ``heading``, a
    paragraph or the text as a whole addresses the model, or the chunk is ``screened``
    for its neighbours (:func:`screened_sources`), every paragraph is taken out, after
    the title and heading that address the model (first) — nothing is kept.
    """
    paragraphs = _paragraphs(text)
    if not (screened or any(addresses_the_model(f) for f in _fields(text, title, heading))):
        return text, ()
    fields = tuple(f for f in (title, heading) if f and addresses_the_model(f))
    return "", fields + tuple(paragraphs)


def screened_sources(sources: Sequence[SelectedSource]) -> frozenset[str]:
    """The labels of the ``sources`` whose whole text is screened.

    A source is screened when one of its fields addresses the model
    (:func:`split_instructions`), when the source next to it in its document does or the
    text across their boundary does (a split instruction is caught whichever half is
    cited), and when any source of its document claims the system role or authority
    over the rest (:func:`claims_authority`). Sources are next to each other when their
    paragraphs touch or overlap in one section, or one starts the section after the
    other's; without positions, when they share a section.
    """
    by_document: dict[str, list[SelectedSource]] = {}
    for source in sources:
        by_document.setdefault(source.candidate.document_id, []).append(source)
    screened: set[str] = set()
    for group in by_document.values():
        ordered = sorted(group, key=_reading_order)
        fields = {
            s.label: _fields(s.included_text, s.candidate.title, s.candidate.heading)
            for s in ordered
        }
        if any(claims_authority(f) for s in ordered for f in fields[s.label]):
            screened.update(s.label for s in ordered)
            continue
        addressed = {s.label for s in ordered if _any_addresses(fields[s.label])}
        screened |= addressed
        for before, after in itertools.pairwise(ordered):
            if not _adjacent(before, after):
                continue
            if {before.label, after.label} & addressed or addresses_the_model(
                _boundary(before, after)
            ):
                screened.update((before.label, after.label))
    return frozenset(screened)


def _any_addresses(fields: Iterable[str]) -> bool:
    return any(addresses_the_model(f) for f in fields)


def _reading_order(source: SelectedSource) -> tuple[int, str, int, str]:
    positions = source.candidate.positions
    if positions is None or not positions.paragraph_indexes:
        return (-1, source.candidate.section_id, -1, source.candidate.chunk_id)
    first = min(positions.paragraph_indexes)
    return (positions.section_index, source.candidate.section_id, first, source.candidate.chunk_id)


def _adjacent(before: SelectedSource, after: SelectedSource) -> bool:
    a, b = before.candidate.positions, after.candidate.positions
    if a is None or b is None or not a.paragraph_indexes or not b.paragraph_indexes:
        return before.candidate.section_id == after.candidate.section_id
    if a.section_index == b.section_index:
        return min(b.paragraph_indexes) <= max(a.paragraph_indexes) + 1
    return b.section_index == a.section_index + 1 and min(b.paragraph_indexes) == 0


def _boundary(before: SelectedSource, after: SelectedSource) -> str:
    """The last paragraph of ``before`` and the first of ``after``, as one run."""
    tail = _paragraphs(before.included_text.removesuffix(CUT_MARK))
    head = _paragraphs(after.included_text)
    return " ".join(p for p in (tail[-1:] + head[:1]))

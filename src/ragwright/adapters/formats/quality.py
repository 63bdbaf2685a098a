"""Is extracted text readable? A check shared by every converter.

A PDF whose fonts carry no Unicode map extracts as replacement characters, private-use
code points, control characters, or glyph names decoded into the wrong alphabet
(``ϲΒϴΒ\\x03habibi``: Greek capitals and a control character inside one Latin word).
Ingested, such text would be embedded and cited as if it were evidence. A *suspicious
word* holds one of those characters, or letters of two alphabets (Latin, Greek,
Cyrillic, Arabic, Hebrew, ...); text is garbled when suspicious words hold more than
:data:`MAX_SUSPICIOUS_SHARE` of its non-space characters, or when fewer than
:data:`MIN_ALNUM_SHARE` of them are letters or digits (symbol soup).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

MAX_SUSPICIOUS_SHARE = 0.25
MIN_ALNUM_SHARE = 0.4
# Below this many non-space characters the shares say little (a form's two labels).
MIN_CHECKED_CHARS = 40
_SCRIPTS = frozenset(
    {"LATIN", "GREEK", "CYRILLIC", "ARABIC", "HEBREW", "ARMENIAN", "GEORGIAN", "COPTIC"}
)


@dataclass(frozen=True, slots=True)
class TextQuality:
    """The shares :func:`assess_text` measured and its verdict."""

    characters: int
    suspicious_share: float
    alnum_share: float

    @property
    def garbled(self) -> bool:
        if self.characters == 0:
            return False
        if self.suspicious_share > MAX_SUSPICIOUS_SHARE:
            return True
        return self.characters >= MIN_CHECKED_CHARS and self.alnum_share < MIN_ALNUM_SHARE

    def describe(self) -> str:
        return (
            f"{self.suspicious_share:.0%} of its characters are in words with replacement, "
            f"private-use or control characters or mixed alphabets, "
            f"{self.alnum_share:.0%} are letters or digits"
        )


@lru_cache(maxsize=4096)
def _script(char: str) -> str | None:
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    first = name.split(" ", 1)[0]
    return first if first in _SCRIPTS else None


def _bad(char: str) -> bool:
    if char == "\ufffd":
        return True
    category = unicodedata.category(char)
    return category in ("Co", "Cn") or (category == "Cc" and not char.isspace())


def assess_text(text: str) -> TextQuality:
    """Measure how much of ``text`` looks mis-decoded (see the module docstring)."""
    total = suspicious = alnum = 0
    for word in text.split():
        total += len(word)
        alnum += sum(1 for c in word if c.isalnum())
        scripts = {s for s in map(_script, word) if s is not None}
        if len(scripts) > 1 or any(_bad(c) for c in word):
            suspicious += len(word)
    if total == 0:
        return TextQuality(0, 0.0, 0.0)
    return TextQuality(total, suspicious / total, alnum / total)

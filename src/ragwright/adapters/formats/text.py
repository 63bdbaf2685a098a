"""Plain text (``.txt``): paragraphs are separated by blank lines.

The first line is the title when a blank line follows it and it is short (at most
:data:`MAX_TITLE_CHARS` characters): the usual shape of a note. Otherwise the file gives
no title and the caller names the document after its file. UTF-8, with or without a
byte order mark; a file that is not UTF-8 is refused as unreadable rather than guessed.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragwright.adapters.formats.converted import ConvertedDocument, ConvertedSection
from ragwright.adapters.formats.limits import DEFAULT_LIMITS, ConversionLimits
from ragwright.errors import UnreadableKind, UnreadableSource

MAX_TITLE_CHARS = 120


def read_utf8(path: Path) -> str:
    """The file's text; a file that is not UTF-8 is :class:`UnreadableSource`."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UnreadableSource(
            str(path), UnreadableKind.CORRUPT, f"cannot read: {error}"
        ) from error
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnreadableSource(
            str(path),
            UnreadableKind.CORRUPT,
            f"not UTF-8 text (byte {error.start}): save it as UTF-8",
        ) from error


def split_paragraphs(text: str) -> list[str]:
    """Blocks separated by blank lines, each stripped; empty blocks dropped."""
    return [p.strip() for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]


def convert_text(path: Path, limits: ConversionLimits = DEFAULT_LIMITS) -> ConvertedDocument:
    """Read one plain text file (see the module docstring)."""
    paragraphs = split_paragraphs(read_utf8(path))
    if not paragraphs:
        raise UnreadableSource(str(path), UnreadableKind.NO_TEXT, "holds no text")
    title: str | None = None
    if len(paragraphs) > 1 and "\n" not in paragraphs[0] and len(paragraphs[0]) <= MAX_TITLE_CHARS:
        title, paragraphs = paragraphs[0], paragraphs[1:]
    return ConvertedDocument(
        title=title,
        title_from="first line" if title is not None else None,
        sections=(ConvertedSection(None, tuple(paragraphs)),),
    )

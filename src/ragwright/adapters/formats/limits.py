"""The limits every conversion runs within, and the checks converters make while they read.

A file is bounded before it is read and while it converts, never only after: its size
(``max_bytes``) before the first byte is read; a Word file's inflated size
(``max_inflated_bytes``) member by member with a running total before python-docx sees
it; a PDF's pages (``max_pages``) before the first page is read; the text a converter
has produced (``max_characters``) as it grows, page by page; and the time and memory of
the conversion process (``seconds``, ``memory_bytes``: :mod:`~ragwright.adapters.formats.box`
enforces them). Each limit is a setting (``RAGWRIGHT_CONVERT_*``, docs/configuration.md);
a file past one is refused as :data:`~ragwright.errors.UnreadableKind.OVER_LIMIT` with a
reason naming the limit, its value and the setting that raises it.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from ragwright.core.documents import MAX_DOCUMENT_CHARS
from ragwright.errors import UnreadableKind, UnreadableSource

MIB = 1024 * 1024
_READ = MIB


@dataclass(frozen=True, slots=True)
class ConversionLimits:
    """What one file's conversion may use (defaults: docs/configuration.md)."""

    max_bytes: int = 64 * MIB
    max_inflated_bytes: int = 64 * MIB
    max_pages: int = 5000
    max_characters: int = MAX_DOCUMENT_CHARS
    seconds: float = 120.0
    memory_bytes: int = 1024 * MIB
    workers: int = 1


DEFAULT_LIMITS = ConversionLimits()
"""The limits of a converter called without any (a test's, a benchmark's)."""

SETTINGS = {
    "max_bytes": "RAGWRIGHT_CONVERT_MAX_BYTES",
    "max_inflated_bytes": "RAGWRIGHT_CONVERT_MAX_INFLATED",
    "max_pages": "RAGWRIGHT_CONVERT_MAX_PAGES",
    "max_characters": "RAGWRIGHT_CONVERT_MAX_CHARS",
    "seconds": "RAGWRIGHT_CONVERT_TIMEOUT",
    "memory_bytes": "RAGWRIGHT_CONVERT_MAX_MEMORY",
}
"""The setting that raises each limit, named in every refusal."""


def over_limit(
    source: str, what: str, limit: str, field: str, *, can_raise: bool = True
) -> UnreadableSource:
    """The refusal of a file past one limit: ``what`` it holds, the ``limit`` it passed
    and the setting (from ``field``) that raises it (``can_raise`` false: the limit is
    at its ceiling, and only splitting the file helps)."""
    fix = (
        "split the file, or raise the limit if it is trusted"
        if can_raise
        else ("split the file (no document holds more)")
    )
    reason = f"{what}, over the limit of {limit} ({SETTINGS[field]}): {fix}"
    return UnreadableSource(source, UnreadableKind.OVER_LIMIT, reason)


def _mib(size: int) -> str:
    return f"{size / MIB:,.1f} MiB" if size >= MIB else f"{size:,} bytes"


def check_size(path: Path, limits: ConversionLimits) -> int:
    """The file's size in bytes; a file over ``max_bytes`` is refused before any of it is
    read."""
    try:
        size = path.stat().st_size
    except OSError as error:
        raise UnreadableSource(
            str(path), UnreadableKind.CORRUPT, f"cannot read: {error}"
        ) from error
    if size > limits.max_bytes:
        raise over_limit(str(path), f"{_mib(size)}", _mib(limits.max_bytes), "max_bytes")
    return size


def check_inflated(path: Path, limits: ConversionLimits) -> None:
    """Read every member of the zip file ``path`` (a Word file) in pieces, counting what
    it inflates to; refuse it once the running total passes ``max_inflated_bytes``.

    The declared sizes are summed first (a bomb usually says what it is), then every
    member is inflated for real, because a declared size can lie. A member whose header
    claims less than its data holds is refused as corrupt before python-docx reads it:
    its compressed size is more than deflate ever adds to the size it declares, or its
    checksum fails at the declared size (zipfile's ``read()`` would inflate all of it
    in one call before cutting it to that size). A file that is not a zip at all is left
    to the converter, which names it corrupt."""
    limit = limits.max_inflated_bytes
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError):
        return  # not a readable zip: the converter refuses it as corrupt, with its reason
    with archive:
        members = archive.infolist()
        declared = 0
        for member in members:
            declared += member.file_size
            if declared > limit:
                raise _inflated(path, declared, limits, "declare")
            if member.compress_size > _most_compressed(member.file_size):
                raise _lying(path, member.filename)
        total = 0
        for member in members:
            try:
                with archive.open(member) as stream:
                    while piece := stream.read(_READ):
                        total += len(piece)
                        if total > limit:
                            raise _inflated(path, total, limits, "inflate to more than")
            except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as error:
                raise _lying(path, member.filename) from error


def _most_compressed(size: int) -> int:
    """The most bytes deflate (or storing) can take for ``size`` bytes: 5 bytes a 16 KiB
    block beyond the data itself, plus the stream's own bytes (zlib's deflateBound, with
    room to spare)."""
    return size + size // 1000 + 5 * (size // 16384 + 1) + 64


def _lying(path: Path, member: str) -> UnreadableSource:
    return UnreadableSource(
        str(path),
        UnreadableKind.CORRUPT,
        f"its part {member!r} does not match its header (damaged, or a zip bomb): export it again",
    )


def _inflated(path: Path, size: int, limits: ConversionLimits, verb: str) -> UnreadableSource:
    return over_limit(
        str(path),
        f"its compressed parts {verb} {_mib(size)}",
        _mib(limits.max_inflated_bytes),
        "max_inflated_bytes",
    )


def check_pages(path: Path, pages: int, limits: ConversionLimits) -> None:
    """Refuse a document of more than ``max_pages`` pages before its first page is read."""
    if pages > limits.max_pages:
        raise over_limit(str(path), f"{pages:,} pages", f"{limits.max_pages:,}", "max_pages")


class CharacterCount:
    """The characters a converter has produced so far; :meth:`add` refuses the file once
    they pass ``max_characters`` (while converting, so the rest is never read)."""

    def __init__(self, path: Path, limits: ConversionLimits) -> None:
        self.path = path
        self.limit = limits.max_characters
        self.total = 0

    def add(self, text: str, where: str = "") -> None:
        self.total += len(text)
        if self.total > self.limit:
            raise over_limit(
                str(self.path),
                f"more than {self.limit:,} characters of text{where}",
                f"{self.limit:,}",
                "max_characters",
                can_raise=self.limit < MAX_DOCUMENT_CHARS,
            )

"""PDF (``.pdf``): the text layer, page by page, read with pypdfium2 (PDFium).

* **Sections.** When the file has an outline (bookmarks), each entry starts a section
  at the paragraph of its page that carries its title (else at the top of its page);
  text before the first entry is the ``intro`` section. Without an outline (or when
  most outline titles appear nowhere in the text), a short line set at least 1.2 times
  larger than the body text (the size most characters have) starts a section; without
  such lines every page is a section, ``Page N`` (``page-N``). Every paragraph records
  its page, so every chunk knows the pages it came from.
* **Paragraphs.** PDFium gives lines in reading order (columns included); a line much
  shorter than the page's median line ends a paragraph, as does a blank line; words
  hyphenated across lines are joined again.
* **Title.** The document information ``Title`` (not ``untitled``), else the first
  outline entry, else the first line of the first page when it is short, else none (the
  caller names the document after its file).
* **Refusals** (:class:`~ragwright.errors.UnreadableSource`): a password
  (``password_protected``), a file PDFium cannot open or one cut short before its
  ``%%EOF`` marker (``corrupt``), pages with pictures but no text that OCR cannot read
  (``no_text_layer``: see below), no text at all (``no_text``), text that is mostly
  mis-decoded glyphs (``garbled``, see ``quality.py``).
* **OCR.** A page with pictures and no text (a scan) is read by OCR when the
  ``tesseract`` command is installed (``ocr.py``). A document with an OCR'd page is
  sectioned by pages, and each OCR'd page is headed ``Page N (OCR)`` (so ``ragwright
  chunks`` and every citation show the text came from OCR); a title taken from its first
  line says ``first line (OCR)``. OCR'd text goes through the same garbled check. Without
  ``tesseract`` such a file is refused as ``no_text_layer`` with a hint to install it.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragwright.adapters.formats.converted import ConvertedDocument, ConvertedSection
from ragwright.adapters.formats.limits import (
    DEFAULT_LIMITS,
    CharacterCount,
    ConversionLimits,
    check_pages,
)
from ragwright.adapters.formats.ocr import INSTALL_HINT, OcrFailed, ocr_page, tesseract_command
from ragwright.adapters.formats.quality import assess_text
from ragwright.adapters.formats.text import MAX_TITLE_CHARS
from ragwright.errors import UnreadableKind, UnreadableSource

# A line shorter than this share of the page's median line length ends its paragraph.
SHORT_LINE = 0.7
# A short line set at least this much larger than the body text is a heading.
HEADING_SIZE = 1.2
_EOF_WINDOW = 2048


@dataclass(frozen=True, slots=True)
class _Entry:
    title: str
    page: int  # 0-based


_NUMBERED_HEADING = re.compile(r"^\d+(\.\d+)*\.?\s+\S.{0,60}$")


def _heading_line(line: str, headings: frozenset[str]) -> bool:
    """A line that stands alone: a numbered heading (``2.1 Setup``) or an outline title."""
    if _NUMBERED_HEADING.match(line) and not line.endswith((".", ",", ";")):
        return True
    normal = _normal(line)
    return any(normal.endswith(h) and len(normal) <= len(h) + 12 for h in headings)


@dataclass(frozen=True, slots=True)
class _Line:
    text: str
    size: float  # the median font size of its characters, in points


def _lines(text: str, sizes: list[float]) -> list[_Line]:
    """A page's lines with their font size; ``sizes[i]`` is the size of ``text[i]``.
    A word PDFium marks as hyphenated at the line end (``\x02`` or ``\ufffe``) is
    joined to its other half on the next line."""
    lines: list[_Line] = []
    chars: list[str] = []
    line_sizes: list[float] = []
    joined = False
    for index, char in enumerate(text):
        if char in "\x02\ufffe":
            joined = True
            continue
        if char in "\r\n":
            if joined:
                continue
            if chars:
                line = " ".join("".join(chars).split())
                if line:
                    lines.append(_Line(line, statistics.median(line_sizes) if line_sizes else 0.0))
            chars, line_sizes = [], []
            continue
        joined = False
        chars.append(char)
        if not char.isspace() and index < len(sizes):
            line_sizes.append(sizes[index])
    if chars:
        line = " ".join("".join(chars).split())
        if line:
            lines.append(_Line(line, statistics.median(line_sizes) if line_sizes else 0.0))
    return lines


def _page_text(pdfium: Any, page: Any, textpage: Any) -> tuple[str, list[float]]:
    """The page's text in PDFium's reading order with each character's font size;
    characters drawn outside the page's box (which a reader never sees) are left out,
    as ``get_text_bounded`` would."""
    left, bottom, right, top = page.get_bbox()
    count = textpage.count_chars()
    text = textpage.get_text_range(0, count)
    kept: list[str] = []
    sizes: list[float] = []
    for index, char in enumerate(text[:count]):
        if not char.isspace() and char not in "\x02\ufffe":
            box_left, box_bottom, box_right, box_top = textpage.get_charbox(index)
            if box_right < left or box_left > right or box_top < bottom or box_bottom > top:
                continue
        kept.append(char)
        sizes.append(pdfium.raw.FPDFText_GetFontSize(textpage, index))
    return "".join(kept), sizes


def _body_size(pages: list[list[_Line]]) -> float:
    """The font size most characters are set in."""
    weights: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            weights[round(line.size, 1)] += len(line.text)
    return weights.most_common(1)[0][0] if weights else 0.0


def _font_heading(line: _Line, body: float) -> bool:
    """A short line set clearly larger than the body text."""
    return (
        body > 0
        and line.size >= HEADING_SIZE * body
        and len(line.text) <= MAX_TITLE_CHARS
        and len(line.text.split()) <= 15
    )


def _paragraphs(
    lines: list[_Line], body: float, headings: frozenset[str] = frozenset()
) -> list[tuple[str, bool]]:
    """One page's lines cut into paragraphs (see the module docstring), each with
    whether it is a font-size heading; a heading line (larger type, numbered, or an
    outline title) is always a paragraph of its own, consecutive heading lines of one
    size one heading."""
    lengths = sorted(len(line.text) for line in lines)
    if not lengths:
        return []
    usual = statistics.median_high(lengths)
    paragraphs: list[tuple[str, bool]] = []
    current: list[str] = []
    last_heading: _Line | None = None

    def close() -> None:
        if current:
            paragraphs.append((" ".join(current), False))
            current.clear()

    for line in lines:
        if _font_heading(line, body):
            close()
            if last_heading is not None and abs(last_heading.size - line.size) < 0.05:
                paragraphs[-1] = (f"{paragraphs[-1][0]} {line.text}", True)
            else:
                paragraphs.append((line.text, True))
            last_heading = line
            continue
        last_heading = None
        if _heading_line(line.text, headings):
            close()
            paragraphs.append((line.text, False))
            continue
        current.append(line.text)
        if len(line.text) < SHORT_LINE * usual:
            close()
    close()
    return paragraphs


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def convert_pdf(path: Path, limits: ConversionLimits = DEFAULT_LIMITS) -> ConvertedDocument:
    """Read one PDF file (see the module docstring), of at most ``limits.max_pages``
    pages and ``limits.max_characters`` characters, counted as the pages are read."""
    # Loaded here, so only a run reading PDFs loads PDFium.
    import pypdfium2 as pdfium  # noqa: PLC0415

    source = str(path)
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _EOF_WINDOW))
            tail = handle.read()
    except OSError as error:
        raise UnreadableSource(source, UnreadableKind.CORRUPT, f"cannot read: {error}") from error
    if b"%%EOF" not in tail:
        raise UnreadableSource(
            source,
            UnreadableKind.CORRUPT,
            "truncated or not a PDF: no end-of-file marker (%%EOF); copy or export it again",
        )
    try:
        pdf = pdfium.PdfDocument(source)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise UnreadableSource(
                source,
                UnreadableKind.PASSWORD_PROTECTED,
                "password-protected: save a copy without the password to ingest it",
            ) from error
        raise UnreadableSource(
            source, UnreadableKind.CORRUPT, f"not a readable PDF ({error}); export it again"
        ) from error
    try:
        outline = [
            _Entry(" ".join(item.get_title().split()), dest.get_index())
            for item in pdf.get_toc(max_depth=3)
            if (dest := item.get_dest()) is not None
            and dest.get_index() is not None
            and item.get_title().strip()
        ]
        headings = frozenset(_normal(entry.title) for entry in outline)
        check_pages(path, len(pdf), limits)
        count = CharacterCount(path, limits)
        page_lines: list[list[_Line]] = []
        ocr_pages: dict[int, list[str]] = {}
        command = tesseract_command()
        pictures = 0
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            try:
                lines = _lines(*_page_text(pdfium, page, textpage))
                for line in lines:
                    count.add(line.text, f" by page {index + 1}")
                if not lines and any(
                    True for _ in page.get_objects(filter=(pdfium.raw.FPDF_PAGEOBJ_IMAGE,))
                ):
                    pictures += 1
                    if command is not None:
                        ocr_pages[index] = ocr_page(command, page)
                        for paragraph in ocr_pages[index]:
                            count.add(paragraph, f" by page {index + 1}")
                page_lines.append(lines)
            except OcrFailed as error:
                raise UnreadableSource(
                    source,
                    UnreadableKind.NO_TEXT_LAYER,
                    f"page {index + 1} is pictures only and OCR failed on it ({error})",
                ) from error
            finally:
                textpage.close()
                page.close()
        body = _body_size(page_lines)
        marked = [_paragraphs(lines, body, headings) for lines in page_lines]
        pages = [[text for text, _ in paragraphs] for paragraphs in marked]
        for index, paragraphs in ocr_pages.items():
            pages[index] = paragraphs
        ocr_read = {index + 1 for index, paragraphs in ocr_pages.items() if paragraphs}
        font_headings = [
            {i for i, (_, heading) in enumerate(paragraphs) if heading} for paragraphs in marked
        ]
        info_title = " ".join(
            str(pdf.get_metadata_dict().get("Title", "")).replace("\x00", " ").split()
        )
    except pdfium.PdfiumError as error:
        raise UnreadableSource(
            source, UnreadableKind.CORRUPT, f"a page cannot be read ({error}); export it again"
        ) from error
    finally:
        pdf.close()
    if not any(pages):
        if pictures:
            plural = pictures != 1
            scan = f"no text layer: {pictures} page{'s' if plural else ''} of pictures only"
            raise UnreadableSource(
                source,
                UnreadableKind.NO_TEXT_LAYER,
                f"{scan} (a scan?); {INSTALL_HINT}"
                if command is None
                else f"{scan}, and OCR (tesseract) read no text on {'them' if plural else 'it'}",
            )
        raise UnreadableSource(source, UnreadableKind.NO_TEXT, "holds no text")
    quality = assess_text("\n".join(p for page in pages for p in page))
    if quality.garbled:
        raise UnreadableSource(
            source,
            UnreadableKind.GARBLED,
            f"garbled text layer ({quality.describe()}): its fonts map no glyph to "
            "Unicode; export it again with embedded Unicode fonts"
            if not ocr_read
            else f"garbled text ({quality.describe()}) after OCR of page"
            f"{'s' if len(ocr_read) > 1 else ''} {', '.join(map(str, sorted(ocr_read)))}",
        )
    title, title_from = _title(info_title, outline, pages)
    if ocr_read:
        if title_from == "first line" and min(i for i, p in enumerate(pages, 1) if p) in ocr_read:
            title_from = "first line (OCR)"
        return ConvertedDocument(title, title_from, _page_sections(pages, ocr_read))
    return ConvertedDocument(title, title_from, _sections(pages, outline, font_headings))


def _title(
    info_title: str, outline: list[_Entry], pages: list[list[str]]
) -> tuple[str | None, str | None]:
    if info_title and info_title.casefold() != "untitled":
        return info_title, "PDF metadata"
    if outline:
        return outline[0].title, "PDF outline"
    first = next((page for page in pages if page), [])
    if len(first) > 1 and len(first[0]) <= MAX_TITLE_CHARS:
        return first[0], "first line"
    return None, None


def _page_sections(
    pages: list[list[str]], ocr_read: set[int] | frozenset[int] = frozenset()
) -> tuple[ConvertedSection, ...]:
    """A section per page with text, ``Page N``; ``Page N (OCR)`` for a page in ``ocr_read``."""
    return tuple(
        ConvertedSection(
            f"Page {number}{' (OCR)' if number in ocr_read else ''}",
            tuple(paragraphs),
            (number,) * len(paragraphs),
        )
        for number, paragraphs in enumerate(pages, start=1)
        if paragraphs
    )


def _fallback_sections(
    pages: list[list[str]], font_headings: list[set[int]]
) -> tuple[ConvertedSection, ...]:
    """Without a usable outline: font-size headings where the text has them, else pages."""
    if any(font_headings):
        return _font_sections(pages, font_headings)
    return _page_sections(pages)


def _font_sections(
    pages: list[list[str]], font_headings: list[set[int]]
) -> tuple[ConvertedSection, ...]:
    """Sections that start at each font-size heading; text before the first is the intro."""
    sections: list[ConvertedSection] = []
    heading: str | None = None
    paragraphs: list[str] = []
    numbers: list[int] = []
    for number, (page, marks) in enumerate(zip(pages, font_headings, strict=True), start=1):
        for index, paragraph in enumerate(page):
            if index in marks:
                if heading is not None or paragraphs:
                    sections.append(ConvertedSection(heading, tuple(paragraphs), tuple(numbers)))
                heading, paragraphs, numbers = paragraph, [], []
                continue
            paragraphs.append(paragraph)
            numbers.append(number)
    if heading is not None or paragraphs:
        sections.append(ConvertedSection(heading, tuple(paragraphs), tuple(numbers)))
    return tuple(sections)


def _sections(
    pages: list[list[str]], outline: list[_Entry], font_headings: list[set[int]]
) -> tuple[ConvertedSection, ...]:
    if not outline:
        return _fallback_sections(pages, font_headings)
    # Where each outline entry starts: (page, paragraph index, heading, the paragraph
    # there is the heading line), never before the previous entry.
    starts: list[tuple[int, int, str, bool]] = []
    cursor = (0, 0)
    for entry in sorted(outline, key=lambda e: e.page):
        page = min(max(entry.page, 0), len(pages) - 1)
        first = cursor[1] if page == cursor[0] else 0
        wanted = _normal(entry.title)
        found = next(
            (
                index
                for index in range(first, len(pages[page]))
                if wanted in _normal(pages[page][index])
                and len(pages[page][index]) <= len(entry.title) + 12
            ),
            None,
        )
        if found is not None:
            starts.append((page, found, pages[page][found], True))
            cursor = (page, found + 1)
        else:
            starts.append((page, first, entry.title, False))
            cursor = (page, first)
    if 2 * sum(1 for start in starts if start[3]) < len(starts):
        # Most titles appear nowhere in the text: an outline that does not describe
        # this text (mistitled, or of another version) is worse than none.
        return _fallback_sections(pages, font_headings)
    sections: list[ConvertedSection] = []
    heading: str | None = None
    paragraphs: list[str] = []
    numbers: list[int] = []
    next_start = 0

    def open_sections(position: tuple[int, int]) -> bool:
        """Start every section that begins at or before ``position``; whether the
        paragraph there is the last one's heading line."""
        nonlocal heading, paragraphs, numbers, next_start
        heading_line = False
        while next_start < len(starts) and starts[next_start][:2] <= position:
            at_page, at_index, title, found = starts[next_start]
            if heading is not None or paragraphs:
                sections.append(ConvertedSection(heading, tuple(paragraphs), tuple(numbers)))
            heading, paragraphs, numbers = title, [], []
            heading_line = found and (at_page, at_index) == position
            next_start += 1
        return heading_line

    for page_index, page_paragraphs in enumerate(pages):
        for index, paragraph in enumerate(page_paragraphs):
            if open_sections((page_index, index)):
                continue
            paragraphs.append(paragraph)
            numbers.append(page_index + 1)
        open_sections((page_index, len(page_paragraphs)))
    open_sections((len(pages), 0))
    if heading is not None or paragraphs:
        sections.append(ConvertedSection(heading, tuple(paragraphs), tuple(numbers)))
    return tuple(sections)

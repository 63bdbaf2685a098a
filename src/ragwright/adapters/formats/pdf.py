"""PDF (``.pdf``): the text layer, page by page, read with pypdfium2 (PDFium).

* **Sections.** When the file has an outline (bookmarks), each entry starts a section
  at the paragraph of its page that carries its title (else at the top of its page);
  text before the first entry is the ``intro`` section. Without an outline, or when
  most outline titles appear nowhere in the text, every page is a section, ``Page N``
  (``page-N``). Every paragraph records its page, so every chunk
  knows the pages it came from.
* **Paragraphs.** PDFium gives lines in reading order (columns included); a line much
  shorter than the page's usual line ends a paragraph, as does a blank line; words
  hyphenated across lines are joined again.
* **Title.** The document information ``Title`` (not ``untitled``), else the first
  outline entry, else the first line of the first page when it is short, else none (the
  caller names the document after its file).
* **Refusals** (:class:`~ragwright.errors.UnreadableSource`): a password
  (``password_protected``), a file PDFium cannot open or one cut short before its
  ``%%EOF`` marker (``corrupt``), pages with pictures but no text (``no_text_layer``:
  scanned, ragwright has no OCR), no text at all (``no_text``), text that is mostly
  mis-decoded glyphs (``garbled``, see ``quality.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ragwright.adapters.formats.converted import ConvertedDocument, ConvertedSection
from ragwright.adapters.formats.quality import assess_text
from ragwright.adapters.formats.text import MAX_TITLE_CHARS
from ragwright.errors import UnreadableKind, UnreadableSource

# A line shorter than this share of the page's usual line length ends its paragraph.
SHORT_LINE = 0.7
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


def _paragraphs(text: str, headings: frozenset[str] = frozenset()) -> list[str]:
    """One page's text cut into paragraphs (see the module docstring); a heading line
    (``_heading_line``) is always a paragraph of its own."""
    text = re.sub(r"\x02\s*\r?\n", "", text).replace("\x02", "").replace("\r\n", "\n")
    lines = [" ".join(line.split()) for line in text.replace("\r", "\n").split("\n")]
    lengths = sorted(len(line) for line in lines if line)
    if not lengths:
        return []
    usual = lengths[min(len(lengths) - 1, int(0.9 * len(lengths)))]
    paragraphs: list[str] = []
    current: list[str] = []

    def close() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in lines:
        if not line:
            close()
            continue
        if _heading_line(line, headings):
            close()
            paragraphs.append(line)
            continue
        current.append(line)
        if len(line) < SHORT_LINE * usual:
            close()
    close()
    return paragraphs


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def convert_pdf(path: Path) -> ConvertedDocument:
    """Read one PDF file (see the module docstring)."""
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
        pages: list[list[str]] = []
        pictures = 0
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            try:
                paragraphs = _paragraphs(textpage.get_text_bounded(), headings)
                if not paragraphs:
                    pictures += sum(
                        1 for _ in page.get_objects(filter=(pdfium.raw.FPDF_PAGEOBJ_IMAGE,))
                    )
                pages.append(paragraphs)
            finally:
                textpage.close()
                page.close()
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
            raise UnreadableSource(
                source,
                UnreadableKind.NO_TEXT_LAYER,
                f"no text layer: {len(pages)} page{'s' if len(pages) != 1 else ''} of "
                "pictures only (a scan?); ragwright has no OCR: run OCR on it first",
            )
        raise UnreadableSource(source, UnreadableKind.NO_TEXT, "holds no text")
    quality = assess_text("\n".join(p for page in pages for p in page))
    if quality.garbled:
        raise UnreadableSource(
            source,
            UnreadableKind.GARBLED,
            f"garbled text layer ({quality.describe()}): its fonts map no glyph to "
            "Unicode; export it again with embedded Unicode fonts",
        )
    title, title_from = _title(info_title, outline, pages)
    return ConvertedDocument(title, title_from, _sections(pages, outline))


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


def _page_sections(pages: list[list[str]]) -> tuple[ConvertedSection, ...]:
    return tuple(
        ConvertedSection(f"Page {number}", tuple(paragraphs), (number,) * len(paragraphs))
        for number, paragraphs in enumerate(pages, start=1)
        if paragraphs
    )


def _sections(pages: list[list[str]], outline: list[_Entry]) -> tuple[ConvertedSection, ...]:
    if not outline:
        return _page_sections(pages)
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
        # this text (mistitled, or of another version) is worse than pages.
        return _page_sections(pages)
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

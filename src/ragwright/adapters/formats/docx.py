"""Word (``.docx``): paragraphs and tables in document order, read with python-docx.

Paragraph styles decide the structure: ``Title`` is the title (else the document's core
property ``title``, else the first ``Heading 1``); ``Heading 1``–``Heading 3`` start
sections, deeper headings stay inside their section as the first line of the block that
follows; consecutive list paragraphs (``List ...`` styles) are one block, one ``- item``
a line; a table is one block (one row a line, cells separated by `` | ``, a merged cell
once). A file holding no text at all (only pictures, say) is refused: OCR covers PDF
scans only, not pictures in Word files. A file that is not a Word document (a renamed
file, a truncated download) is refused as corrupt.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from ragwright.adapters.formats.converted import ConvertedDocument, unpaged_document
from ragwright.adapters.formats.html import table_text
from ragwright.adapters.formats.limits import (
    DEFAULT_LIMITS,
    CharacterCount,
    ConversionLimits,
    check_inflated,
)
from ragwright.errors import UnreadableKind, UnreadableSource

_HEADING = re.compile(r"^heading (\d)$", re.IGNORECASE)


def convert_docx(path: Path, limits: ConversionLimits = DEFAULT_LIMITS) -> ConvertedDocument:
    """Read one Word file (see the module docstring); its parts inflate to at most
    ``limits.max_inflated_bytes``, counted before python-docx reads them."""
    check_inflated(path, limits)
    count = CharacterCount(path, limits)
    style_names: dict[str | None, str] = {}
    # python-docx (and lxml) load here, so only a run reading .docx files pays for them.
    import docx  # noqa: PLC0415
    from docx.opc.exceptions import PackageNotFoundError  # noqa: PLC0415
    from docx.table import Table  # noqa: PLC0415
    from docx.text.paragraph import Paragraph  # noqa: PLC0415

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise UnreadableSource(
            str(path),
            UnreadableKind.CORRUPT,
            f"not a readable Word (.docx) file ({type(error).__name__}): export it again",
        ) from error
    title = (document.core_properties.title or "").strip()
    title_from: str | None = "DOCX properties" if title else None
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    pending: str | None = None
    items: list[str] = []

    def add(block: str) -> None:
        nonlocal pending
        count.add(block)
        if pending is not None:
            block, pending = f"{pending}\n{block}", None
        sections[-1][1].append(block)

    def flush_list() -> None:
        if items:
            add("\n".join(f"- {item}" for item in items))
            items.clear()

    for element in document.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "tbl":
            flush_list()
            table = Table(element, document)
            rows = []
            for row in table.rows:
                cells: list[str] = []
                for cell in row.cells:
                    text = " ".join(cell.text.split())
                    if not cells or cells[-1] != text:  # a merged cell repeats
                        cells.append(text)
                rows.append(cells)
            text = table_text(rows)
            if text:
                add(text)
            continue
        if tag != "p":
            continue
        paragraph = Paragraph(element, document)
        text = " ".join(paragraph.text.split())
        # A style is looked up by id in the styles part, a search each time: once an id.
        style_id = element.style
        if style_id not in style_names:
            found = paragraph.style
            style_names[style_id] = (found.name if found is not None else "") or ""
        style = style_names[style_id]
        if not text:
            continue
        if style == "Title":
            flush_list()
            if not title:
                title, title_from = text, "Title paragraph"
                continue
        heading = _HEADING.match(style)
        if heading is not None:
            flush_list()
            level = int(heading.group(1))
            if level <= 3:
                if not title and level == 1:
                    title, title_from = text, "first heading"
                    continue
                if pending is not None:
                    sections[-1][1].append(pending)
                    pending = None
                sections.append((text, []))
            else:
                if pending is not None:
                    sections[-1][1].append(pending)
                pending = text
            continue
        if style.startswith("List"):
            items.append(text)
            continue
        flush_list()
        add(text)
    flush_list()
    if pending is not None:
        sections[-1][1].append(pending)
    if len(sections) == 1 and not sections[0][1]:
        pictures = len(document.inline_shapes)
        raise UnreadableSource(
            str(path),
            UnreadableKind.NO_TEXT,
            "holds no text"
            + (f" (only {pictures} picture{'s' if pictures != 1 else ''})" if pictures else "")
            + ": ragwright reads text, and OCRs PDF scans only, not Word pictures",
        )
    return unpaged_document(title, title_from, sections)

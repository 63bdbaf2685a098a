"""HTML (``.html``, ``.htm``): exported wiki pages, generated documentation sites.

Boilerplate is dropped before anything is read: ``nav``, ``header``, ``footer``,
``aside``, ``script``, ``style``, ``noscript``, ``template``, ``form`` and elements with
ARIA roles ``navigation``, ``banner``, ``contentinfo`` or ``complementary``. The text
read is the ``main`` element (else ``article``, else ``body``). The title is the
``<title>`` element, else the first ``h1``. ``h1``–``h3`` headings start sections
(the first ``h1`` is the title when ``<title>`` is missing); ``h4``–``h6`` stay inside
their section, as the first line of the block that follows. Paragraphs, list items,
``pre`` blocks and block quotes are blocks; a table is one block, one row a line with
cells separated by `` | `` (a header row first). Parsed by Beautiful Soup with the
standard library's parser: no network, no scripts run. UTF-8, or the encoding a
``<meta charset>`` declares.
"""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup
from bs4.dammit import EncodingDetector
from bs4.element import NavigableString, Tag

from ragwright.adapters.formats.converted import ConvertedDocument, unpaged_document
from ragwright.adapters.formats.limits import DEFAULT_LIMITS, ConversionLimits
from ragwright.adapters.formats.text import read_utf8
from ragwright.errors import UnreadableKind, UnreadableSource

BOILERPLATE = (
    "nav",
    "header",
    "footer",
    "aside",
    "script",
    "style",
    "noscript",
    "template",
    "form",
)
BOILERPLATE_ROLES = ("navigation", "banner", "contentinfo", "complementary")
_SECTION_HEADINGS = ("h1", "h2", "h3")
_SUB_HEADINGS = ("h4", "h5", "h6")
_BLOCKS = ("p", "li", "pre", "blockquote", "dt", "dd", "figcaption", "caption")
_CONTAINERS = ("ul", "ol", "dl")
_BLOCK_LEVEL = (
    *_SECTION_HEADINGS,
    *_SUB_HEADINGS,
    *_BLOCKS,
    *_CONTAINERS,
    "table",
    "div",
    "section",
    "article",
    "main",
    "details",
    "summary",
    "figure",
    "br",
    "hr",
)


def _text(tag: Tag) -> str:
    return re.sub(r"\s+", " ", tag.get_text(" ")).strip()


def table_text(rows: list[list[str]]) -> str:
    """A table as readable text: one row a line, cells separated by `` | ``."""
    return "\n".join(" | ".join(cells) for cells in rows if any(cells))


def _read_html(path: Path) -> str:
    """UTF-8, or the encoding the page declares (``<meta charset>``: older exports are
    often ``windows-1252``); a page in another encoding that declares none is refused
    rather than guessed."""
    try:
        return read_utf8(path)
    except UnreadableSource:
        data = path.read_bytes()
        declared = EncodingDetector.find_declared_encoding(data, is_html=True)
        if declared is None:
            raise
        try:
            return data.decode(declared)
        except (LookupError, UnicodeDecodeError) as error:
            raise UnreadableSource(
                str(path),
                UnreadableKind.CORRUPT,
                f"not {declared} text as its <meta charset> declares ({error}): save it as UTF-8",
            ) from error


def convert_html(path: Path, limits: ConversionLimits = DEFAULT_LIMITS) -> ConvertedDocument:
    """Read one HTML file (see the module docstring)."""
    soup = BeautifulSoup(_read_html(path), "html.parser")
    title_tag = soup.find("title")
    title = _text(title_tag) if isinstance(title_tag, Tag) else ""
    for tag in soup.find_all(BOILERPLATE):
        tag.decompose()
    for role in BOILERPLATE_ROLES:
        for tag in soup.find_all(True, attrs={"role": role}):
            tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.find("body") or soup
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    title_from = "<title>" if title else None
    pending: str | None = None

    def add(block: str) -> None:
        nonlocal pending
        if not block:
            return
        if pending is not None:
            block, pending = f"{pending}\n{block}", None
        sections[-1][1].append(block)

    def walk(node: Tag) -> None:
        nonlocal title, title_from, pending
        for child in node.children:
            if isinstance(child, NavigableString):
                add(re.sub(r"\s+", " ", str(child)).strip())
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name in _SECTION_HEADINGS:
                heading = _text(child)
                if not heading:
                    continue
                if not title and name == "h1":
                    title, title_from = heading, "first heading"
                    continue
                if pending is not None:
                    sections[-1][1].append(pending)
                    pending = None
                sections.append((heading, []))
            elif name in _SUB_HEADINGS:
                if pending is not None:
                    sections[-1][1].append(pending)
                pending = _text(child) or None
            elif name == "table":
                rows = [
                    [_text(cell) for cell in row.find_all(("th", "td"))]
                    for row in child.find_all("tr")
                ]
                add(table_text(rows))
            elif name == "pre":
                add(child.get_text().strip("\n"))
            elif name in _BLOCKS:
                if name == "li" and child.find(_CONTAINERS):
                    walk(child)
                else:
                    add(_text(child))
            elif child.find(_BLOCK_LEVEL) is None:
                add(_text(child))  # inline content (a span, a link): one block
            else:
                walk(child)

    walk(root if isinstance(root, Tag) else soup)
    if pending is not None:
        sections[-1][1].append(pending)
    if not any(blocks for _, blocks in sections) and all(h is None for h, _ in sections):
        raise UnreadableSource(str(path), UnreadableKind.NO_TEXT, "holds no text")
    return unpaged_document(title, title_from, sections)

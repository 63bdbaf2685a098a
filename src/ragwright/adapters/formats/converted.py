"""What every format converter returns, and the one way it becomes a source document.

A converter reads one file into a :class:`ConvertedDocument`: the title it found (and
where), the sections in reading order (a heading, its paragraphs, and for paged formats
the page of each paragraph), and front matter where the format has some. It raises
:class:`~ragwright.errors.UnreadableSource` for a file whose text it cannot read. The
metadata (id, type, state, tenant) is decided by the caller
(``adapters/source_metadata.py``); :func:`build_sections` turns the headings into stable
section ids the way the Markdown loader always has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragwright.types import SourceSection


@dataclass(frozen=True, slots=True)
class ConvertedSection:
    """A heading (``None``: text before the first heading) and its paragraphs."""

    heading: str | None
    paragraphs: tuple[str, ...]
    pages: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConvertedDocument:
    """One file's text in reading order, before any metadata is decided.

    ``title_from`` says where ``title`` came from (``first heading``, ``PDF metadata``,
    ``<title>``, ``DOCX properties``, ``first line``); ``None`` when the file gives no
    title. ``front_matter`` holds the keys a Markdown file's front matter gave.
    """

    title: str | None
    title_from: str | None
    sections: tuple[ConvertedSection, ...]
    front_matter: Mapping[str, Any] = field(default_factory=dict)


def unpaged_document(
    title: str, title_from: str | None, sections: list[tuple[str | None, list[str]]]
) -> ConvertedDocument:
    """A document of an unpaged format from its ``(heading, paragraphs)`` pairs in reading
    order, leaving out a headless pair with no text (the empty start before a heading)."""
    return ConvertedDocument(
        title=title or None,
        title_from=title_from,
        sections=tuple(
            ConvertedSection(heading, tuple(blocks))
            for heading, blocks in sections
            if heading is not None or blocks
        ),
    )


def _is_title(heading: str | None, title: str) -> bool:
    """Whether ``heading`` is ``title`` but for case and spacing."""
    return (
        heading is not None
        and " ".join(heading.split()).casefold() == " ".join(title.split()).casefold()
    )


def slugify(text: str) -> str:
    """Lower-case ASCII letters and digits joined by single hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def build_sections(title: str, sections: tuple[ConvertedSection, ...]) -> list[SourceSection]:
    """Source sections with stable ids: the heading's slug (``-2``, ``-3`` for repeats),
    ``intro`` for text before the first heading (headed by the title).

    A heading with no text of its own before the next one (``Chapter 2`` then ``2.1
    Setup``; Markdown's ``# Breaking Changes`` then ``## API Changes``) becomes the first
    line of the next section's first paragraph, so no text is lost and no section is
    empty.
    """
    built: list[SourceSection] = []
    used: dict[str, int] = {}
    carried: str | None = None
    for index, section in enumerate(sections):
        paragraphs = list(section.paragraphs)
        pages = None if section.pages is None else list(section.pages)
        if not paragraphs and not built and carried is None and _is_title(section.heading, title):
            # The document's own title as its first heading (an HTML <h1>, a PDF outline's
            # top entry): it is the title, as Markdown's and Word's are, not body text.
            continue
        if not paragraphs:
            carried = section.heading if carried is None else f"{carried}\n{section.heading}"
            continue
        if carried is not None and paragraphs:
            paragraphs[0] = f"{carried}\n{paragraphs[0]}"
            carried = None
        if section.heading is None:
            base, shown = "intro", title
        else:
            base, shown = slugify(section.heading) or f"section-{index + 1}", section.heading
        used[base] = used.get(base, 0) + 1
        section_id = base if used[base] == 1 else f"{base}-{used[base]}"
        built.append(
            SourceSection(
                section_id, shown, tuple(paragraphs), None if pages is None else tuple(pages)
            )
        )
    if carried is not None:
        # Headings with nothing after them at the end: keep them as a last paragraph.
        if built:
            last = built[-1]
            built[-1] = SourceSection(
                last.section_id,
                last.heading,
                (*last.paragraphs, carried),
                None if last.pages is None else (*last.pages, last.pages[-1]),
            )
        else:
            built.append(SourceSection("intro", title, (carried,)))
    return built

"""Markdown (``.md``): optional YAML front matter, then CommonMark with tables.

* optional YAML front matter between ``---`` lines carries the metadata
  (``document_id``, ``title``, ``document_type``, ``publication_state``, ``tenant``,
  ``revision``, ``source_uri``); other keys are another tool's (a site generator's
  ``sort_rank``, ``nav_title``) and ignored, except one so close to a key of ours
  (``publication_sate``, ``Tenant``, ``documentType``) that it is a typo, refused with
  the key it resembles, since ignoring it would file the document under the wrong
  state or tenant;
* the first ``#`` heading is the title (front matter ``title`` wins when both exist);
  a file with neither is named after its file (``adapters/source_metadata.py``);
* each ``##`` heading starts a section whose id is a stable slug of the heading
  (``-2``, ``-3`` … for repeats); text before the first ``##`` forms an ``intro``
  section headed by the title;
* deeper headings stay inside their section, attached to the block that follows them;
* blocks are separated by blank lines, except that a fenced code block, a list, a table
  or a block quote is always one block: blocks are cut from the source by the parser's
  line map, never by splitting text.

A section with no text of its own before the next heading (``# Breaking Changes`` then
``## API Changes``) is merged into the next one, as in the other formats
(:func:`~ragwright.adapters.formats.converted.build_sections`).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt

from ragwright.adapters.formats.converted import ConvertedDocument, ConvertedSection
from ragwright.adapters.formats.limits import DEFAULT_LIMITS, ConversionLimits
from ragwright.errors import SourceError, UnreadableKind, UnreadableSource

FRONT_MATTER_KEYS = frozenset(
    {
        "document_id",
        "title",
        "document_type",
        "publication_state",
        "tenant",
        "revision",
        "source_uri",
    }
)
_SKIPPED_BLOCKS = frozenset({"hr"})
_markdown = MarkdownIt("commonmark").enable("table")


def convert_markdown(path: Path, limits: ConversionLimits = DEFAULT_LIMITS) -> ConvertedDocument:
    """Parse one Markdown file (see the module docstring)."""
    try:
        # utf-8-sig: editors on Windows start files with a byte order mark, which
        # would otherwise hide the first "# Title" line.
        source = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(str(path), f"cannot read: {error}") from error
    meta, body = _front_matter(path, source)
    lines = body.split("\n")
    title: str | None = None
    sections: list[tuple[str | None, list[str]]] = []  # heading, blocks
    pending_subheading: str | None = None
    for token in _markdown.parse(body):
        if token.level != 0 or token.map is None or token.type.endswith("_close"):
            continue
        text = "\n".join(lines[token.map[0] : token.map[1]]).strip()
        if token.type == "heading_open":
            heading = (
                re.sub(r"^#{1,6}\s*|\s*#*\s*$", "", text)
                if text.startswith("#")
                else text.split("\n")[0]
            )
            if token.tag == "h1" and title is None and not sections:
                title = heading
                continue
            if token.tag in ("h1", "h2"):
                if pending_subheading is not None:
                    sections[-1][1].append(pending_subheading)
                    pending_subheading = None
                sections.append((heading, []))
                continue
            if pending_subheading is not None:
                _current(sections).append(pending_subheading)
            pending_subheading = text
            continue
        if token.type in _SKIPPED_BLOCKS or (
            token.type == "html_block" and text.startswith("<!--")
        ):
            continue
        if not text:
            continue
        if pending_subheading is not None:
            text = pending_subheading + "\n" + text
            pending_subheading = None
        _current(sections).append(text)
    if pending_subheading is not None:
        _current(sections).append(pending_subheading)
    if not sections:
        # A site's navigation page holds only front matter (its title and menu place):
        # nothing to search, so it is left out as any file with no text is.
        only = "front matter" if source.startswith("---\n") else "a title" if title else ""
        raise UnreadableSource(
            str(path), UnreadableKind.NO_TEXT, "holds no text" + (f", only {only}" if only else "")
        )
    title_from: str | None = None
    if "title" in meta:
        title, title_from = str(meta["title"]), "front matter"
    elif title is not None:
        title_from = "first heading"
    return ConvertedDocument(
        title=title,
        title_from=title_from,
        sections=tuple(ConvertedSection(h, tuple(blocks)) for h, blocks in sections),
        front_matter=meta,
    )


def _current(sections: list[tuple[str | None, list[str]]]) -> list[str]:
    if not sections:
        sections.append((None, []))
    return sections[-1][1]


def _yaml_problem(error: yaml.YAMLError) -> str:
    """The parser's complaint on one line, at its line of the file (the front matter
    starts on line 2, after ``---``)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"{error.problem} (line {mark.line + 2}, column {mark.column + 1})"
    return " ".join(str(error).split())


def _front_matter(path: Path, source: str) -> tuple[dict[str, Any], str]:
    if not source.startswith("---\n"):
        return {}, source
    end = re.search(r"^(---|\.\.\.)\s*$", source[4:], flags=re.MULTILINE)
    if end is None:
        raise SourceError(str(path), "front matter starts with '---' but never closes")
    try:
        meta = yaml.safe_load(source[4 : 4 + end.start()]) or {}
    except yaml.YAMLError as error:
        raise SourceError(
            str(path), f"front matter is not valid YAML: {_yaml_problem(error)}"
        ) from error
    if not isinstance(meta, dict):
        raise SourceError(str(path), "front matter must be a mapping of keys to values")
    typos = [
        f"front matter key {key!r} is not one ragwright reads: did you mean {known!r}?"
        for key, known in ((key, _resembled(key)) for key in sorted(map(str, meta)))
        if known is not None
    ]
    if typos:
        raise SourceError(str(path), "; ".join(typos))
    ours = {key: value for key, value in meta.items() if key in FRONT_MATTER_KEYS}
    if meta.get("draft") is True and "publication_state" not in ours:
        # Hugo's, Jekyll's and Docusaurus's draft marker: never published by default.
        ours["publication_state"] = "draft"
    # A blank line is kept where the front matter was so line numbers stay meaningful.
    return ours, source[4 + end.end() :].lstrip("\n")


def _resembled(key: str) -> str | None:
    """The key of ours that ``key`` misspells (case, ``-`` for ``_`` and about one letter
    in five aside), if any; ``None`` for one of ours or another tool's."""
    if key in FRONT_MATTER_KEYS:
        return None
    spelled = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key).casefold().replace("-", "_")
    close = difflib.get_close_matches(spelled, FRONT_MATTER_KEYS, n=1, cutoff=0.8)
    return close[0] if close else None

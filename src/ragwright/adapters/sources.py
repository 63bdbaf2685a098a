"""Source adapters: Markdown, JSON and BEIR ``corpus.jsonl`` files → validated documents.

Markdown (``.md``):

* optional YAML front matter between ``---`` lines carries the metadata
  (``document_id``, ``title``, ``document_type``, ``publication_state``, ``tenant``,
  ``revision``, ``source_uri``); unknown keys are rejected so a typo cannot be ignored;
* the first ``#`` heading is the title (front matter ``title`` wins when both exist);
* each ``##`` heading starts a section whose id is a stable slug of the heading
  (``-2``, ``-3`` … for repeats); text before the first ``##`` forms an ``intro``
  section headed by the title;
* deeper headings stay inside their section, attached to the block that follows them;
* blocks are separated by blank lines, except that a fenced code block, a list, a table
  or a block quote is always one block: blocks are cut from the source by the parser's
  line map, never by splitting text.

JSON (``.json``): one document, a list of documents, or ``{"documents": [...]}``, in the
seeds' shape (``document_id``, ``title``, ``document_type``, ``publication_state``,
``sections: [{section_id, heading, paragraphs}]``; camelCase accepted).

BEIR (``corpus.jsonl``): one document per line (``_id``, ``title``, ``text``); the text
becomes one section headed by the title, split into paragraphs on blank lines. A blank
title stays missing: the document's title and its section heading are empty, so its
chunks hold only the text (nothing invented is embedded or BM25-indexed). Benchmark
corpora contain documents no rule would accept (an empty text); with ``on_invalid``
such a document is reported and left out instead of failing the load. Markdown and JSON
sources are authored, so they always fail on the first invalid document.

Metadata missing from a file comes from ``SourceDefaults`` (CLI ``--type``, ``--state``,
``--tenant``); a type or state missing from both is a :class:`DocumentError` naming the
field, a tenant missing from both leaves the document untenanted. Files are UTF-8, with or
without a byte order mark. A directory holding no document file is a
:class:`SourceError`: it is almost always a wrong path, and "0 documents" would read as
success.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from markdown_it import MarkdownIt
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ragwright.core.documents import SeenDocuments, validate_document
from ragwright.errors import DocumentError, SourceError
from ragwright.types import DEFAULT_DOCUMENT_TYPES, SkippedDocument, SourceDocument, SourceSection

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
_DEFAULTED_FIELDS = frozenset({"document_type", "publication_state", "tenant"})
_markdown = MarkdownIt("commonmark").enable("table")


@dataclass(frozen=True, slots=True)
class SourceDefaults:
    """Metadata applied where a source file does not give it."""

    document_type: str | None = None
    publication_state: str | None = None
    tenant: str | None = None
    document_types: tuple[str, ...] = DEFAULT_DOCUMENT_TYPES


T = TypeVar("T")


def load_sources(
    paths: Sequence[Path],
    defaults: SourceDefaults = SourceDefaults(),
    *,
    skipped: Callable[[str, str], None] | None = None,
    on_invalid: Callable[[SkippedDocument], None] | None = None,
) -> list[SourceDocument]:
    """Load every supported file under ``paths`` (directories are walked, sorted).

    ``skipped`` receives (path, reason) for every file under a directory that is not
    loaded (README/LICENSE files, unsupported types), so callers can say what was left out.
    ``on_invalid``, when given, receives every BEIR document that breaks a validation
    rule, which is then left out; without it (the default) the load fails on it. It never
    applies to Markdown or JSON sources. The whole corpus is held in the list: to ingest
    one of any size, iterate a :class:`SourceStream` instead.

    Raises:
        SourceError: a path does not exist, a directory holds no document file, a file
            cannot be parsed, or has no supported type.
        DocumentError: a document breaks a validation rule (including duplicate ids).
    """
    return list(_read_documents(paths, defaults, skipped or _ignore, on_invalid))


class SourceStream:
    """The documents under ``paths``, read and validated one file at a time on each pass.

    Iterating it yields what :func:`load_sources` would return, in the same order (paths
    as given, each directory's files sorted, each file's documents in file order), with
    the same errors, raised when the pass reaches them. Nothing is kept between
    documents but the (tenant, id) keys already seen, for the duplicate check, so a
    corpus of any size can be iterated as often as needed: ingestion makes a validation
    pass, then a writing pass. A BEIR ``corpus.jsonl`` is read line by line.

    After a complete pass, ``skipped`` holds the (path, reason) of every file that was
    not read and ``invalid`` the BEIR documents left out (``skip_invalid``; without it
    the pass fails on the first one). Both are rebuilt by every pass.

    Example:
        >>> stream = SourceStream([Path("samples/corpus")])  # doctest: +SKIP
        >>> sum(1 for _ in stream), stream.skipped  # doctest: +SKIP
    """

    def __init__(
        self,
        paths: Sequence[Path],
        defaults: SourceDefaults = SourceDefaults(),
        *,
        skip_invalid: bool = False,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.defaults = defaults
        self.skip_invalid = skip_invalid
        self.skipped: tuple[tuple[str, str], ...] = ()
        self.invalid: tuple[SkippedDocument, ...] = ()

    def __iter__(self) -> Iterator[SourceDocument]:
        skipped: list[tuple[str, str]] = []
        invalid: list[SkippedDocument] = []
        yield from _read_documents(
            self.paths,
            self.defaults,
            lambda path, reason: skipped.append((path, reason)),
            invalid.append if self.skip_invalid else None,
        )
        self.skipped, self.invalid = tuple(skipped), tuple(invalid)


def _read_documents(
    paths: Sequence[Path],
    defaults: SourceDefaults,
    skipped: Callable[[str, str], None],
    on_invalid: Callable[[SkippedDocument], None] | None,
    *,
    check_unique: bool = True,
) -> Iterator[SourceDocument]:
    left_out = 0

    def skip(path: str, reason: str) -> None:
        nonlocal left_out
        left_out += 1
        skipped(path, reason)

    documents: Iterable[SourceDocument]

    def earlier_source(key: tuple[str | None, str]) -> str | None:
        # A repeat: read the sources again up to the first document with the key.
        again = _read_documents(paths, defaults, _ignore, _drop, check_unique=False)
        for document in again:
            if (document.tenant, document.document_id) == key:
                return document.source_uri
        return None

    seen = SeenDocuments(earlier_source) if check_unique else None
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise SourceError(str(root), "no such file or directory")
        left_out_before = left_out
        found = False
        for path, relative in _files(root, skip):
            found = True
            if path.suffix == ".md":
                documents = (_naming(path, load_markdown, path, defaults, document_id=relative),)
            elif path.suffix == ".json":
                documents = _naming(path, load_json, path, defaults)
            elif path.suffix == ".jsonl":
                documents = load_beir_corpus(path, defaults, on_invalid=on_invalid)
            else:  # only a file given by name can have another type
                raise SourceError(str(path), "unsupported file type (use .md, .json or .jsonl)")
            for document in documents:
                if seen is not None:
                    seen.add(document)
                yield document
        if not found:
            # Almost always a wrong path; "0 documents" would read as success.
            raise SourceError(
                str(root),
                "no document files (.md, .json, .jsonl) in this directory"
                + (
                    f"; {left_out - left_out_before} other "
                    f"file{'s' if left_out - left_out_before != 1 else ''} left out"
                    if left_out > left_out_before
                    else ""
                ),
            )


def _naming(path: Path, load: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``load(*args, **kwargs)``, a document it refuses named with its file."""
    try:
        return load(*args, **kwargs)
    except DocumentError as error:
        if error.source is not None:
            raise
        raise DocumentError(error.document_id, error.field, error.rule, source=str(path)) from error


def _files(root: Path, skipped: Callable[[str, str], None]) -> Iterator[tuple[Path, str]]:
    if root.is_file():
        yield root, root.with_suffix("").name
        return
    for path in sorted(root.rglob("*")):
        if not path.is_file() or any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if path.suffix not in (".md", ".json", ".jsonl"):
            skipped(str(path), f"unsupported file type {path.suffix or '(none)'!r}")
        elif path.name.lower() in ("readme.md", "license.md"):
            skipped(str(path), "README and LICENSE files describe a folder; they are not documents")
        else:
            yield path, path.relative_to(root).with_suffix("").as_posix()


def _ignore(_path: str, _reason: str) -> None:
    return None


def _drop(_document: SkippedDocument) -> None:
    return None


def slugify(text: str) -> str:
    """Lower-case ASCII letters and digits joined by single hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def load_markdown(
    path: Path, defaults: SourceDefaults, *, document_id: str | None = None
) -> SourceDocument:
    """Parse one Markdown file (see the module docstring for the rules)."""
    try:
        # utf-8-sig: editors on Windows start files with a byte order mark, which
        # would otherwise hide the first "# Title" line.
        source = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(str(path), f"cannot read: {error}") from error
    meta, body = _front_matter(path, source)
    lines = body.split("\n")
    title: str | None = None
    sections: list[tuple[str, list[str]]] = []  # heading, blocks
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
    doc_title = meta.get("title", title)
    if doc_title is None:
        raise SourceError(str(path), "no title: add a '# Title' line or a front matter 'title'")
    doc_id = meta.get("document_id", document_id or path.stem)
    built: list[SourceSection] = []
    used: dict[str, int] = {}
    for index, (heading, blocks) in enumerate(sections):
        base = "intro" if heading is _INTRO else (slugify(heading) or f"section-{index + 1}")
        used[base] = used.get(base, 0) + 1
        section_id = base if used[base] == 1 else f"{base}-{used[base]}"
        shown = str(doc_title) if heading is _INTRO else heading
        if not blocks:
            raise DocumentError(
                str(doc_id), f"sections[{index}]", f"section {shown!r} in {path} has no content"
            )
        built.append(SourceSection(section_id, shown, tuple(blocks)))
    return validate_document(
        document_id=doc_id,
        title=doc_title,
        document_type=meta.get("document_type", defaults.document_type),
        publication_state=meta.get("publication_state", defaults.publication_state),
        sections=built,
        revision=meta.get("revision"),
        source_uri=str(meta.get("source_uri", path.as_posix())),
        tenant=meta.get("tenant", defaults.tenant),
        document_types=defaults.document_types,
    )


class _Intro(str):
    """Marker heading for text before the first section heading."""


_INTRO = _Intro("")


def _current(sections: list[tuple[str, list[str]]]) -> list[str]:
    if not sections:
        sections.append((_INTRO, []))
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
    unknown = sorted(set(meta) - FRONT_MATTER_KEYS)
    if unknown:
        raise SourceError(
            str(path), f"unknown front matter keys {unknown}; allowed: {sorted(FRONT_MATTER_KEYS)}"
        )
    # A blank line is kept where the front matter was so line numbers stay meaningful.
    return meta, source[4 + end.end() :].lstrip("\n")


class _JsonSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    section_id: str = Field(validation_alias=AliasChoices("section_id", "sectionId"))
    heading: str
    paragraphs: list[str]


class _JsonDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document_id: str = Field(validation_alias=AliasChoices("document_id", "documentId"))
    title: str
    document_type: str | None = Field(
        None, validation_alias=AliasChoices("document_type", "documentType")
    )
    publication_state: str | None = Field(
        None, validation_alias=AliasChoices("publication_state", "publicationState")
    )
    tenant: str | None = None
    revision: str | None = None
    source_uri: str | None = Field(None, validation_alias=AliasChoices("source_uri", "sourceUri"))
    sections: list[_JsonSection]


def load_json(path: Path, defaults: SourceDefaults) -> list[SourceDocument]:
    """Documents from one JSON file in the seeds' shape."""
    try:
        data = json.loads(path.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SourceError(str(path), f"not readable JSON: {error}") from error
    if isinstance(data, Mapping) and "documents" in data:
        data = data["documents"]
    items = data if isinstance(data, list) else [data]
    documents = []
    for index, item in enumerate(items):
        try:
            parsed = _JsonDocument.model_validate(item)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SourceError(
                str(path), f"document {index}: field {where!r}: {first['msg']}"
            ) from error
        documents.append(
            validate_document(
                document_id=parsed.document_id,
                title=parsed.title,
                document_type=parsed.document_type or defaults.document_type,
                publication_state=parsed.publication_state or defaults.publication_state,
                sections=[
                    SourceSection(s.section_id, s.heading, tuple(s.paragraphs))
                    for s in parsed.sections
                ],
                revision=parsed.revision,
                source_uri=parsed.source_uri or path.as_posix(),
                tenant=parsed.tenant if parsed.tenant is not None else defaults.tenant,
                document_types=defaults.document_types,
            )
        )
    return documents


def load_beir_corpus(
    path: Path,
    defaults: SourceDefaults,
    *,
    on_invalid: Callable[[SkippedDocument], None] | None = None,
) -> Iterator[SourceDocument]:
    """Documents from a BEIR ``corpus.jsonl`` (one JSON object per line).

    A line that is not a BEIR document is a :class:`SourceError` whatever ``on_invalid``
    says; a document that breaks a validation rule goes to ``on_invalid`` when given.
    """
    try:
        handle = path.open("r", encoding="utf-8-sig")
    except OSError as error:
        raise SourceError(str(path), f"cannot read: {error}") from error
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id = str(row["_id"])
                text = row["text"]
            except (ValueError, KeyError, TypeError) as error:
                raise SourceError(f"{path}:{number}", f"not a BEIR corpus line: {error}") from error
            title = str(row.get("title") or "").strip()
            paragraphs = tuple(p.strip() for p in re.split(r"\n\s*\n", str(text)) if p.strip())
            try:
                document = validate_document(
                    document_id=doc_id,
                    title=title,
                    document_type=defaults.document_type,
                    publication_state=defaults.publication_state,
                    sections=[SourceSection("text", title, paragraphs)],
                    source_uri=f"{path.as_posix()}#{doc_id}",
                    tenant=defaults.tenant,
                    document_types=defaults.document_types,
                    allow_missing_title=True,
                )
            except DocumentError as error:
                # Metadata comes from the defaults, the same for every line: a mistake
                # there is the caller's, and skipping would silently drop the corpus.
                if on_invalid is None or error.field in _DEFAULTED_FIELDS:
                    raise
                on_invalid(SkippedDocument(doc_id, f"{path}:{number}", error.field, error.rule))
                continue
            yield document

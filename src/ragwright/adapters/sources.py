"""Source folders → validated documents, every format through one path.

A folder is walked in sorted order; each file is read by the converter its extension
names (``adapters/formats/``: Markdown, plain text, HTML, Word, PDF), or is the seeds'
JSON or a BEIR ``corpus.jsonl`` (``formats/seeds.py``). The metadata of a converted
file (id, title, type, state, tenant) is decided by ``adapters/source_metadata.py``:
front matter, then the folder's ``ragwright-sources.toml`` rules, then ``--type``,
``--state``, ``--tenant``; where each field came from is reported per document
(:class:`~ragwright.types.DocumentOrigin`).

**Unreadable files in a folder are left out; problems stop the run.** A folder of real
files always holds some whose text cannot be read (a password, a scan with no OCR
installed, a garbled text layer, over a conversion limit, JSON that is not ragwright's
document shape): found by walking a folder, such a file is left out and listed with its
reason and kind, like files of other types and README and LICENSE files; given by name,
it is a problem. A file that breaks a rule its author can fix (metadata, front matter,
validation) does not stop the pass either: the pass goes on and, at its end, raises the
problem (one file's error as it is; several as one
:class:`~ragwright.errors.SourceProblems` naming every file with its problem and the
option that fixes it) — before anything is written. With ``skip_invalid`` every such
file is left out instead and listed with its reason (kind ``invalid``), as are invalid
BEIR documents. A path that does not exist, and a folder holding no document file, stop
at once: they are almost always a wrong path, and "0 documents" would read as success.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from ragwright.adapters.formats import CONVERTERS
from ragwright.adapters.formats.box import convert
from ragwright.adapters.formats.converted import slugify
from ragwright.adapters.formats.limits import DEFAULT_LIMITS, ConversionLimits
from ragwright.adapters.formats.markdown import FRONT_MATTER_KEYS, convert_markdown
from ragwright.adapters.formats.seeds import load_beir_corpus, load_json
from ragwright.adapters.source_metadata import (
    RULES_FILE,
    SourceDefaults,
    SourceRules,
    build_document,
    check_defaults,
    fix_for,
    read_rules,
)
from ragwright.core.documents import SeenDocuments
from ragwright.errors import (
    DocumentError,
    NothingReadable,
    SourceError,
    SourceProblems,
    UnreadableSource,
)
from ragwright.types import DocumentOrigin, SkippedDocument, SourceDocument

SEED_SUFFIXES = (".json", ".jsonl")
_FOLDER_NOTES = frozenset({"readme", "license", "notice", "copying"})
SUPPORTED_SUFFIXES = (*CONVERTERS, *SEED_SUFFIXES)
MAX_ORIGINS = 1000
"""Documents whose metadata origins a pass keeps (the rest are counted): a folder a
team ingests holds fewer, and a corpus of millions must not grow the run's memory."""

Skipped = Callable[[str, str, str], None]
"""Receives (path, reason, kind) of every file left out."""

__all__ = [
    "FRONT_MATTER_KEYS",
    "SUPPORTED_SUFFIXES",
    "SkippedDocument",
    "SourceDefaults",
    "SourceStream",
    "load_file",
    "load_json",
    "load_markdown",
    "load_sources",
    "slugify",
]


def load_sources(
    paths: Sequence[Path],
    defaults: SourceDefaults = SourceDefaults(),
    *,
    skipped: Skipped | None = None,
    on_invalid: Callable[[SkippedDocument], None] | None = None,
    skip_invalid: bool = False,
    origins: Callable[[DocumentOrigin], None] | None = None,
    limits: ConversionLimits = DEFAULT_LIMITS,
) -> list[SourceDocument]:
    """Load every supported file under ``paths`` (directories are walked, sorted).

    ``skipped`` receives (path, reason, kind) for every file not loaded (README/LICENSE
    files, unsupported types, and with ``skip_invalid`` files with a problem).
    ``on_invalid``, when given, receives every BEIR document that breaks a validation
    rule, which is then left out; without it the load fails on it. ``origins`` receives
    where each converted file's metadata came from; every file converts within
    ``limits`` (``adapters/formats/box.py``). The whole corpus is held in the
    list: to ingest one of any size, iterate a :class:`SourceStream` instead.

    Raises:
        SourceError: a path does not exist, a directory holds no document file, or a
            file given by name has no supported type.
        SourceProblems: files with problems (all of them, at the end of the pass),
            unless ``skip_invalid``.
    """
    return list(
        _read_documents(
            paths,
            defaults,
            skipped or _ignore,
            on_invalid,
            skip_invalid=skip_invalid,
            origins=origins or _drop,
            limits=limits,
        )
    )


def load_file(
    path: Path,
    defaults: SourceDefaults = SourceDefaults(document_type="note", publication_state="published"),
    limits: ConversionLimits = DEFAULT_LIMITS,
) -> list[SourceDocument]:
    """The validated documents of one file, whatever its format (a benchmark's entry).

    Raises:
        UnreadableSource: the file's text cannot be read (``kind`` says why).
        SourceError, DocumentError: anything else wrong with it.
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(str(path), "no such file")
    rules = read_rules(path.parent)
    return list(_documents(path, path.name, defaults, rules, None, _drop, limits))


class SourceStream:
    """The documents under ``paths``, read and validated one file at a time on each pass.

    Iterating it yields what :func:`load_sources` would return, in the same order (paths
    as given, each directory's files sorted, each file's documents in file order), with
    the same errors. Nothing is kept between documents but the (tenant, id) keys already
    seen, for the duplicate check, and the origins of the first :data:`MAX_ORIGINS`
    documents, so a corpus of any size can be iterated as often as needed: ingestion
    makes a validation pass, then a writing pass. A BEIR ``corpus.jsonl`` is read line
    by line.

    After a complete pass, ``skipped`` holds the (path, reason, kind) of every file that
    was not read, ``invalid`` the BEIR documents left out, ``origins`` where each
    document's metadata came from, ``origins_left_out`` how many were not kept and
    ``documents_read`` how many documents it yielded (``None`` before a complete pass;
    a large run reads its sources in a second process, docs/ingestion.md). All are
    rebuilt by every pass.

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
        limits: ConversionLimits = DEFAULT_LIMITS,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.defaults = defaults
        self.skip_invalid = skip_invalid
        self.limits = limits
        self.skipped: tuple[tuple[str, str, str], ...] = ()
        self.invalid: tuple[SkippedDocument, ...] = ()
        self.origins: tuple[DocumentOrigin, ...] = ()
        self.origins_left_out = 0
        self.documents_read: int | None = None

    def __iter__(self) -> Iterator[SourceDocument]:
        skipped: list[tuple[str, str, str]] = []
        invalid: list[SkippedDocument] = []
        origins: list[DocumentOrigin] = []
        left_out = read = 0

        def keep(origin: DocumentOrigin) -> None:
            nonlocal left_out
            if len(origins) < MAX_ORIGINS:
                origins.append(origin)
            else:
                left_out += 1

        for document in _read_documents(
            self.paths,
            self.defaults,
            lambda path, reason, kind: skipped.append((path, reason, kind)),
            invalid.append if self.skip_invalid else None,
            skip_invalid=self.skip_invalid,
            origins=keep,
            limits=self.limits,
        ):
            read += 1
            yield document
        self.documents_read = read
        self.skipped, self.invalid = tuple(skipped), tuple(invalid)
        self.origins, self.origins_left_out = tuple(origins), left_out


def _read_documents(
    paths: Sequence[Path],
    defaults: SourceDefaults,
    skipped: Skipped,
    on_invalid: Callable[[SkippedDocument], None] | None,
    *,
    skip_invalid: bool,
    origins: Callable[[DocumentOrigin], None] = lambda _origin: None,
    check_unique: bool = True,
    limits: ConversionLimits = DEFAULT_LIMITS,
) -> Iterator[SourceDocument]:
    left_out = 0
    problems: list[tuple[str, str]] = []
    errors: list[SourceError | DocumentError] = []

    first_left_out: list[tuple[str, str]] = []

    def skip(path: str, reason: str, kind: str) -> None:
        nonlocal left_out
        left_out += 1
        if len(first_left_out) < MAX_ORIGINS:
            first_left_out.append((path, reason))
        skipped(path, reason, kind)

    def earlier_source(key: tuple[str | None, str]) -> str | None:
        # A repeat: read the sources again up to the first document with the key.
        again = _read_documents(
            paths,
            defaults,
            _ignore,
            _drop_invalid,
            skip_invalid=True,
            check_unique=False,
            limits=limits,
        )
        for document in again:
            if (document.tenant, document.document_id) == key:
                return document.source_uri
        return None

    seen = SeenDocuments(earlier_source) if check_unique else None
    check_defaults(defaults)
    read = 0
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise SourceError(str(root), "no such file or directory")
        rules = read_rules(root if root.is_dir() else root.parent)
        left_out_before = left_out
        found = False
        for path, relative in _files(root, skip):
            found = True
            try:
                checked = _checked(path, relative, defaults, rules, on_invalid, origins, limits)
                for document in checked:
                    if seen is not None:
                        seen.add(document)  # a repeat names two files: it stops the pass
                    read += 1
                    yield document
            except _FileProblem as problem:
                reason, kind = _problem(problem.error, path, rules)
                walked = root.is_dir() and isinstance(problem.error, UnreadableSource)
                if skip_invalid or walked:
                    skip(str(path), reason, kind)
                else:
                    problems.append((str(path), reason))
                    errors.append(problem.error)
        if not found:
            count = left_out - left_out_before
            raise SourceError(
                str(root),
                f"no document files ({', '.join(SUPPORTED_SUFFIXES)}) in this directory"
                + (f"; {count} other file{'s' if count != 1 else ''} left out" if count else ""),
            )
    if len(errors) == 1:
        raise errors[0]  # one problem: its own error, typed and with its fields
    if problems:
        raise SourceProblems(", ".join(str(p) for p in paths), tuple(problems))
    if not read and left_out:
        # Every file left out: "0 documents" would read as success.
        raise NothingReadable(", ".join(str(p) for p in paths), tuple(first_left_out))


class _FileProblem(Exception):
    """One file's problem, carried past the duplicate check to the pass's list."""

    def __init__(self, error: SourceError | DocumentError) -> None:
        self.error = error


def _checked(
    path: Path,
    relative: str,
    defaults: SourceDefaults,
    rules: SourceRules,
    on_invalid: Callable[[SkippedDocument], None] | None,
    origins: Callable[[DocumentOrigin], None],
    limits: ConversionLimits,
) -> Iterator[SourceDocument]:
    """The file's documents; its problem, when it has one, as a :class:`_FileProblem`."""
    try:
        yield from _documents(path, relative, defaults, rules, on_invalid, origins, limits)
    except (SourceError, DocumentError) as error:
        raise _FileProblem(error) from error


def _documents(
    path: Path,
    relative: str,
    defaults: SourceDefaults,
    rules: SourceRules,
    on_invalid: Callable[[SkippedDocument], None] | None,
    origins: Callable[[DocumentOrigin], None],
    limits: ConversionLimits = DEFAULT_LIMITS,
) -> Iterable[SourceDocument]:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return load_json(path, defaults)
    if suffix == ".jsonl":
        return load_beir_corpus(path, defaults, on_invalid=on_invalid)
    converter = CONVERTERS.get(suffix)
    if converter is None:  # only a file given by name can have another type
        raise SourceError(str(path), f"unsupported file type (use {', '.join(SUPPORTED_SUFFIXES)})")
    markdown = suffix == ".md"
    # Markdown ids drop the extension (as they always have); others keep it, so
    # backup.pdf and backup.docx stay two documents.
    document_id = relative[: -len(path.suffix)] if markdown else relative
    try:
        document, origin = build_document(
            convert(path, converter, limits),
            path,
            relative,
            defaults,
            rules,
            document_id=document_id,
        )
    except DocumentError as error:
        if error.source is not None:
            raise
        raise DocumentError(error.document_id, error.field, error.rule, source=str(path)) from error
    origins(origin)
    return (document,)


def _problem(error: SourceError | DocumentError, path: Path, rules: SourceRules) -> tuple[str, str]:
    """A file's problem as (reason with its fix, kind)."""
    if isinstance(error, UnreadableSource):
        return error.reason, str(error.kind)
    if isinstance(error, SourceError):
        # A BEIR line names itself (file:line); the file is named beside the reason.
        where = error.source[len(str(path)) + 1 :] if error.source != str(path) else ""
        return (f"line {where}: " if where.isdigit() else "") + error.reason, "invalid"
    return (
        f"document {error.document_id!r}, field {error.field!r}: {error.rule}"
        + fix_for(error, str(rules.path)),
        "invalid",
    )


def _files(root: Path, skipped: Skipped) -> Iterator[tuple[Path, str]]:
    if root.is_file():
        yield root, root.name
        return
    for path in sorted(root.rglob("*")):
        if not path.is_file() or any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        relative = path.relative_to(root).as_posix()
        if relative == RULES_FILE:
            continue
        if path.stem.lower() in _FOLDER_NOTES and path.suffix.lower() in ("", ".md", ".txt"):
            skipped(
                str(path),
                "README, LICENSE, NOTICE and COPYING files describe a folder; they are not "
                "documents",
                "not_a_document",
            )
        elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
            skipped(
                str(path),
                f"unsupported file type {path.suffix or '(none)'!r} "
                f"(read: {', '.join(SUPPORTED_SUFFIXES)})",
                "unsupported_type",
            )
        else:
            yield path, relative


def load_markdown(
    path: Path, defaults: SourceDefaults, *, document_id: str | None = None
) -> SourceDocument:
    """One Markdown file as a validated document (id: ``document_id``, else the stem)."""
    document, _ = build_document(
        convert(path, convert_markdown, DEFAULT_LIMITS),
        path,
        path.name,
        defaults,
        read_rules(path.parent),
        document_id=document_id or path.stem,
    )
    return document


def _ignore(_path: str, _reason: str, _kind: str) -> None:
    return None


def _drop(_origin: DocumentOrigin) -> None:
    return None


def _drop_invalid(_document: SkippedDocument) -> None:
    return None

"""``POST /v1/ingestions/files``: ingest files as they are (PDF, Word, HTML, text,
Markdown), sent as ``multipart/form-data``.

The files are written to a private temporary folder under the names they were sent with
(a name may hold folders, ``guides/runbook.pdf``; never ``..``, an absolute path or a
hidden part), read there exactly as ``ragwright ingest FOLDER`` reads a folder, and the
folder is removed before the response. What the key grants limits it as it limits the
JSON route: every document gets the key's tenant (a front matter naming another tenant
is refused), a document outside the key's allowlist or types is refused (403), and the
run goes through the same ingestion (one at a time, 409). ``document_type`` and
``publication_state`` play ``--type`` and ``--state``; a ``ragwright-sources.toml``
sent with the files gives rules. Unreadable files are refused with every file's problem
(422), or left out and listed with ``skip_invalid``. At most :data:`MAX_UPLOAD_FILES`
files and :data:`MAX_UPLOAD_BYTES` bytes in all (413 beyond). A name is at most
:data:`MAX_NAME_PART` bytes a part and :data:`MAX_NAME` bytes in all, and no name may be
a folder of another (``a.md`` beside ``a.md/b.md``): each is a 422 naming the file.
Every file converts within the conversion limits (``adapters/formats/limits.py``).

The route is :mod:`ragwright.service.routes.files`; this module holds what it does to
the files.
"""

import dataclasses
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from fastapi import UploadFile

from ragwright.application.grants import OutsideGrant, check_documents, write_grant_for
from ragwright.application.keys import ApiKey
from ragwright.application.requests.corpus import SkippedFile
from ragwright.errors import DocumentError, SourceError, SourceProblems, UnreadableKind
from ragwright.service.ingestions import outside_grant_problem
from ragwright.service.problems import Problem, invalid_field
from ragwright.types import SourceDocument

MAX_UPLOAD_FILES = 1000
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
_CHUNK = 1024 * 1024
MAX_NAME_PART = 255
MAX_NAME = 1024


def _relative_name(index: int, name: str | None) -> PurePosixPath:
    """The file's name as a safe relative path, or a 422 naming the file."""
    field = f"files[{index}]"
    if not name:
        raise invalid_field(field, "needs a file name (its extension picks the format)")
    path = PurePosixPath(name.replace("\\", "/"))
    if (
        path.is_absolute()
        or any(part in ("", ".", "..") or part.startswith(".") for part in path.parts)
        or any(ord(c) < 32 or c == "\x7f" for c in name)
    ):
        raise invalid_field(
            field, f"{name!r}: a relative name without '..', hidden parts or control characters"
        )
    if len(name.encode()) > MAX_NAME or any(
        len(part.encode()) > MAX_NAME_PART for part in path.parts
    ):
        raise invalid_field(
            field,
            f"{name[:60]!r}...: a name of at most {MAX_NAME} bytes, each folder or file name "
            f"at most {MAX_NAME_PART}",
        )
    return path


async def save_files(files: list[UploadFile], root: Path) -> None:
    if len(files) > MAX_UPLOAD_FILES:
        raise invalid_field("files", f"at most {MAX_UPLOAD_FILES} files in one request", status=413)
    total = 0
    seen: set[PurePosixPath] = set()
    folders: set[PurePosixPath] = set()
    for index, upload in enumerate(files):
        relative = _relative_name(index, upload.filename)
        if relative in seen:
            raise invalid_field(f"files[{index}]", f"{str(relative)!r} was sent twice")
        clash = (
            relative
            if relative in folders
            else next((parent for parent in relative.parents if parent in seen), None)
        )
        if clash is not None:
            raise invalid_field(
                f"files[{index}]",
                f"{str(relative)!r}: {str(clash)!r} is sent both as a file and as a folder",
            )
        seen.add(relative)
        folders.update(relative.parents)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as handle:
            while chunk := await upload.read(_CHUNK):
                total += len(chunk)
                if total > MAX_UPLOAD_BYTES:
                    raise invalid_field(
                        "files",
                        f"at most {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB in one request",
                        status=413,
                    )
                handle.write(chunk)


def owned(
    document: SourceDocument, key: ApiKey, root: Path, document_types: tuple[str, ...]
) -> SourceDocument:
    """The document as the key may write it: its tenant, inside its allowlist and types,
    its source the name it was sent with (not the temporary folder)."""
    sent_as = Path(document.source_uri).relative_to(root).as_posix()
    if document.tenant is not None and document.tenant != key.tenant:
        raise Problem(
            403,
            "outside-tenant",
            "Not allowed",
            f"{sent_as}: names tenant {document.tenant!r}; this key writes only "
            f"{key.tenant!r}'s documents"
            if key.tenant
            else f"{sent_as}: names a tenant; this key writes untenanted documents",
        )
    if key.documents and document.document_id not in key.documents:
        raise Problem(
            403,
            "outside-allowlist",
            "Not allowed",
            f"{sent_as}: document id {document.document_id!r} is outside this key's allowlist",
        )
    if document.document_type not in document_types:
        raise Problem(
            403,
            "outside-types",
            "Not allowed",
            f"{sent_as}: document type {document.document_type!r} is outside this key's types",
        )
    try:  # its publication state too: the same write grant as the JSON route's
        check_documents(write_grant_for(key), (document,))
    except OutsideGrant as error:
        raise outside_grant_problem(error, sent_as) from error
    return dataclasses.replace(document, tenant=key.tenant, source_uri=sent_as)


def unreadable(skipped: Sequence[SkippedFile], root: Path) -> SourceProblems | None:
    """The sent files a folder walk left out as unreadable, as the problems they are for
    an upload (its sender named each file); ``None`` when there are none."""
    problems = tuple((s.path, s.reason) for s in skipped if s.kind in _UNREADABLE_KINDS)
    return SourceProblems(str(root), problems) if problems else None


# Files of other types stay left out (listed), as a folder walk leaves them.
_UNREADABLE_KINDS = frozenset(str(k) for k in UnreadableKind) - {UnreadableKind.UNSUPPORTED_TYPE}


def refused_files(error: SourceError | DocumentError, root: Path) -> Problem:
    """A 422 naming every file that could not be read and why (nothing was written)."""
    prefix = f"{root}/"
    if isinstance(error, DocumentError):  # one file whose converted text breaks a rule
        where = error.source or error.document_id
        problems: tuple[tuple[str, str], ...] = (
            (where, f"document {error.document_id!r}, field {error.field!r}: {error.rule}"),
        )
    elif isinstance(error, SourceProblems):
        problems = error.problems
    else:
        problems = ((error.source, error.reason),)
    errors = [
        {
            "field": "files" if path == str(root) else f"files[{path.removeprefix(prefix)}]",
            "rule": as_sent(reason, root),
        }
        for path, reason in problems
    ]
    return Problem(
        422,
        "invalid-request",
        "The request is invalid",
        "; ".join(f"{e['field']}: {e['rule']}" for e in errors),
        errors=errors,
    )


# The command line's options as this route's form fields, in the fixes a reason offers.
_FIELDS = (
    ("--type", "document_type"),
    ("--state", "publication_state"),
    ("--skip-invalid", "skip_invalid"),
)


def as_sent(text: str, root: Path) -> str:
    """``text`` (a refusal's reason, a metadata origin) as the caller sent the files:
    names relative to the upload, never the server's temporary folder, and the form's
    fields where the command line would name its options."""
    text = text.replace(f"{root}/", "").replace(str(root), "the files sent")
    for option, field in _FIELDS:
        text = text.replace(option, field)
    return text

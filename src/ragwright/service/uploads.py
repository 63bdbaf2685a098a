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
files and :data:`MAX_UPLOAD_BYTES` bytes in all (413 beyond).
"""

import asyncio
import dataclasses
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, UploadFile
from fastapi.responses import JSONResponse

from ragwright.application import Application, IngestRequest, IngestResult
from ragwright.application.grants import OutsideGrant, check_documents, write_grant_for
from ragwright.application.keys import ApiKey
from ragwright.errors import SourceError, SourceProblems
from ragwright.service.ingestions import ingestion_summary, outside_grant_problem
from ragwright.service.problems import Problem, invalid_field, problem_responses
from ragwright.types import SourceDocument

MAX_UPLOAD_FILES = 1000
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
_CHUNK = 1024 * 1024

Ingest = Callable[[tuple[SourceDocument, ...], ApiKey, bool], Awaitable[IngestResult]]


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
    return path


async def _save(files: list[UploadFile], root: Path) -> None:
    if len(files) > MAX_UPLOAD_FILES:
        raise invalid_field("files", f"at most {MAX_UPLOAD_FILES} files in one request", status=413)
    total = 0
    seen: set[PurePosixPath] = set()
    for index, upload in enumerate(files):
        relative = _relative_name(index, upload.filename)
        if relative in seen:
            raise invalid_field(f"files[{index}]", f"{str(relative)!r} was sent twice")
        seen.add(relative)
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


def _owned(
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


def file_ingestion_routes(
    application: Application,
    caller: Callable[[str], Callable[..., Awaitable[ApiKey]]],
    ingest: Ingest,
) -> APIRouter:
    """The upload route; ``ingest`` runs the documents as ``POST /v1/ingestions`` does."""
    router = APIRouter(tags=["ingestion"])

    @router.post(
        "/v1/ingestions/files",
        responses=problem_responses(400, 401, 403, 409, 413, 415, 422, 503),
    )
    async def ingest_files(
        key: Annotated[ApiKey, Depends(caller("ingest"))],
        files: Annotated[list[UploadFile], File(description="The files; names may hold folders.")],
        document_type: Annotated[str | None, Form(max_length=100)] = None,
        publication_state: Annotated[str | None, Form(max_length=100)] = None,
        prune: Annotated[bool, Form()] = False,
        skip_invalid: Annotated[bool, Form()] = False,
    ) -> JSONResponse:
        """Ingest files of the caller's tenant (see the module docs); returns the run's
        summary with the files left out and where each document's metadata came from."""
        document_types = key.types or application.settings.index.document_types
        with tempfile.TemporaryDirectory(prefix="ragwright-upload-") as folder:
            root = Path(folder)
            await _save(files, root)
            request = IngestRequest(
                (root,),
                document_type=document_type,
                publication_state=publication_state,
                tenant=key.tenant,
                skip_invalid=skip_invalid,
            )
            try:
                loaded = await asyncio.to_thread(application.load_documents, request)
            except SourceError as error:
                raise _refused(error, root) from error
            documents = tuple(_owned(d, key, root, document_types) for d in loaded.documents)
            if not documents:
                raise invalid_field("files", "no file could be read (see skipped_files)")
            result = await ingest(documents, key, prune)

            def sent(path: str) -> str:
                return Path(path).relative_to(root).as_posix()

            out: dict[str, Any] = ingestion_summary(result)
            out["skipped_files"] = [
                {**dataclasses.asdict(s), "path": sent(s.path)} for s in loaded.skipped
            ]
            out["metadata"] = [
                {
                    key: value.replace(f"{root}/", "") if isinstance(value, str) else value
                    for key, value in dataclasses.asdict(m).items()
                }
                for m in loaded.origins
            ]
            out["metadata_left_out"] = loaded.origins_left_out
        return JSONResponse(out)

    return router


def _refused(error: SourceError, root: Path) -> Problem:
    """A 422 naming every file that could not be read and why (nothing was written)."""
    prefix = f"{root}/"
    problems = (
        error.problems if isinstance(error, SourceProblems) else ((error.source, error.reason),)
    )
    errors = [
        {"field": f"files[{path.removeprefix(prefix)}]", "rule": reason}
        for path, reason in problems
    ]
    return Problem(
        422,
        "invalid-request",
        "The request is invalid",
        "; ".join(f"{e['field']}: {e['rule']}" for e in errors),
        errors=errors,
    )

"""``POST /v1/ingestions/files``: files sent as ``multipart/form-data``, read like a
folder under the key's grant (:mod:`ragwright.service.uploads` has the rules), then
ingested as ``POST /v1/ingestions`` ingests."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse

from ragwright.application import IngestRequest
from ragwright.errors import DocumentError, SourceError
from ragwright.service import uploads
from ragwright.service.converting import converting, upload_folder
from ragwright.service.dependencies import App, IngestCaller
from ragwright.service.ingesting import Ingest
from ragwright.service.ingestions import ingestion_summary
from ragwright.service.problems import invalid_field, problem_responses

router = APIRouter(tags=["ingestion"])


@router.post(
    "/v1/ingestions/files",
    responses=problem_responses(400, 401, 403, 409, 413, 415, 422, 503),
)
async def ingest_files(
    request: Request,
    key: IngestCaller,
    files: Annotated[list[UploadFile], File(description="The files; names may hold folders.")],
    application: App,
    ingesting: Ingest,
    document_type: Annotated[str | None, Form(max_length=100)] = None,
    publication_state: Annotated[str | None, Form(max_length=100)] = None,
    prune: Annotated[bool, Form()] = False,
    skip_invalid: Annotated[bool, Form()] = False,
) -> JSONResponse:
    """Ingest files of the caller's tenant (see the module docs); returns the run's
    summary with the files left out and where each document's metadata came from."""
    document_types = key.types or application.settings.index.document_types
    with upload_folder() as root:
        await uploads.save_files(files, root)
        ingest_request = IngestRequest(
            (root,),
            document_type=document_type,
            publication_state=publication_state,
            tenant=key.tenant,
            skip_invalid=skip_invalid,
        )
        try:
            loaded = await converting(request, lambda: application.load_documents(ingest_request))
        except (SourceError, DocumentError) as error:
            raise uploads.refused_files(error, root) from error
        unreadable = uploads.unreadable(loaded.skipped, root) if not skip_invalid else None
        if unreadable is not None:  # each file was sent by name: refused, not left out
            raise uploads.refused_files(unreadable, root)
        documents = tuple(uploads.owned(d, key, root, document_types) for d in loaded.documents)
        if not documents:
            raise invalid_field("files", "no file could be read (see skipped_files)")
        result = await ingesting.run(documents, key, prune)

        def sent(path: str) -> str:
            return Path(path).relative_to(root).as_posix()

        out: dict[str, Any] = ingestion_summary(result)
        out["skipped_files"] = [
            {**dataclasses.asdict(s), "path": sent(s.path)} for s in loaded.skipped
        ]
        out["metadata"] = [
            {
                name: uploads.as_sent(value, root) if isinstance(value, str) else value
                for name, value in dataclasses.asdict(m).items()
            }
            for m in loaded.origins
        ]
        out["metadata_left_out"] = loaded.origins_left_out
    return JSONResponse(out)

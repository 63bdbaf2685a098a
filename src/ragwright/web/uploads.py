"""The status page's "ingest a file" form: an uploaded file of any format ``ragwright
ingest`` reads (Markdown, text, HTML, Word, PDF, the seeds' JSON) read by the project's
own source loader into documents, then handed to the same ingestion as
``POST /v1/ingestions`` (the same validation and grant checks: tenant, allowlist, types).

The upload is written under a fresh temporary directory with a sanitised name (never a
path the browser chose) and removed afterwards (``service/converting.py``), and converted
within the conversion limits; files the loader does not read are listed
with its reason, as ``ragwright ingest`` lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath

from ragwright.application import Application, IngestRequest
from ragwright.application.keys import ApiKey
from ragwright.errors import ConversionCancelled, RagwrightError
from ragwright.service.converting import upload_folder
from ragwright.service.schemas import IngestBody

MAX_UPLOAD_BYTES = 2 * 1024 * 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UploadRefused(RagwrightError):
    """The source loader refused the uploaded file; the message names the file."""


@dataclass
class LoadedUpload:
    """What the loader made of one uploaded file."""

    name: str
    body: IngestBody | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)


def safe_name(filename: str | None) -> str:
    """The file's base name with anything but letters, digits, ``.``, ``_`` and ``-``
    replaced (``upload`` when nothing is left)."""
    base = PurePath((filename or "").replace("\\", "/")).name
    cleaned = _UNSAFE.sub("_", base).lstrip(".")[:120]
    return cleaned or "upload"


def load_upload(application: Application, key: ApiKey, filename: str, data: bytes) -> LoadedUpload:
    """The documents ``data`` holds, as an ingestion body for ``key``'s tenant.

    Raises:
        UploadRefused: the loader refused the file (an invalid document, named with the
            rule it breaks).
    """
    name = safe_name(filename)
    with upload_folder() as root:
        folder = str(root)
        path = root / name
        path.write_bytes(data)
        try:
            loaded = application.load_documents(IngestRequest((path,), tenant=key.tenant))
        except ConversionCancelled:
            raise  # the client went away: nobody to tell
        except RagwrightError as error:
            # Named by the uploaded file, never by the server's temporary path.
            message = str(error).replace(str(path), name).replace(folder + "/", "")
            raise UploadRefused(message.replace(folder, "")) from error
    skipped = [(PurePath(s.path).name, s.reason) for s in loaded.skipped]
    if not loaded.documents:
        return LoadedUpload(name, None, skipped or [(name, "no documents in this file")])
    body = IngestBody.model_validate(
        {
            "documents": [
                {
                    "document_id": d.document_id,
                    "title": d.title,
                    "document_type": d.document_type,
                    "publication_state": d.publication_state,
                    "revision": d.revision,
                    "source_uri": name,
                    "sections": [
                        {
                            "section_id": s.section_id,
                            "heading": s.heading,
                            "paragraphs": list(s.paragraphs),
                            "pages": None if s.pages is None else list(s.pages),
                        }
                        for s in d.sections
                    ],
                }
                for d in loaded.documents
            ]
        }
    )
    return LoadedUpload(name, body, skipped)

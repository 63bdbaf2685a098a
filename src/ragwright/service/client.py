"""A small client for the service's own routes (``ragwright ingest --server``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import httpx

from ragwright.errors import ServiceError
from ragwright.types import SourceDocument


def document_body(document: SourceDocument) -> dict[str, Any]:
    """A document in the shape ``POST /v1/ingestions`` takes (the tenant is the key's)."""
    return {
        "document_id": document.document_id,
        "title": document.title,
        "document_type": document.document_type,
        "publication_state": document.publication_state,
        "revision": document.revision,
        "source_uri": document.source_uri or None,
        "sections": [
            {
                "section_id": s.section_id,
                "heading": s.heading,
                "paragraphs": list(s.paragraphs),
                **({} if s.pages is None else {"pages": list(s.pages)}),
            }
            for s in document.sections
        ],
    }


def submit_ingestion(
    url: str,
    key: str,
    documents: Sequence[SourceDocument],
    *,
    prune: bool = False,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    """Send ``documents`` to the service at ``url`` and wait for its run summary.

    Raises:
        ServiceError: the service refused (its problem detail) or could not be reached.
    """
    endpoint = url.rstrip("/") + "/v1/ingestions"
    body = {"documents": [document_body(d) for d in documents], "prune": prune}
    try:
        response = httpx.post(
            endpoint,
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(timeout, connect=10.0),
        )
    except httpx.HTTPError as error:
        raise ServiceError(url, 0, str(error) or type(error).__name__) from error
    if response.status_code != 200:
        try:
            detail = str(response.json().get("detail", response.text))
        except ValueError:
            detail = response.text[:200]
        raise ServiceError(url, response.status_code, _named(detail, documents))
    result: dict[str, Any] = response.json()
    return result


def _named(detail: str, documents: Sequence[SourceDocument]) -> str:
    """A problem about ``documents[i]`` names that document and its source file too:
    the caller knows files, not the request's positions."""
    found = re.match(r"documents\[(\d+)\]", detail)
    if found is None or int(found.group(1)) >= len(documents):
        return detail
    document = documents[int(found.group(1))]
    source = f", {document.source_uri}" if document.source_uri else ""
    return f"{detail} (document {document.document_id!r}{source})"

"""The ingestion every ingesting route shares (``POST /v1/ingestions``, its files route
and the page's ingest form): one at a time in the process (409), within the key's write
grant (403), refused documents named by their place in the request (422), the run's
summary kept for the status page."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends

from ragwright.application import Application, IngestRequest, IngestResult
from ragwright.application.grants import OutsideGrant, write_grant_for
from ragwright.application.keys import ApiKey
from ragwright.errors import ChunkingError, DocumentError, DocumentProblems, InputTooLong
from ragwright.service.activity import Activity
from ragwright.service.dependencies import App, State
from ragwright.service.guards import guarded
from ragwright.service.ingestions import documents_of, outside_grant_problem, place_of
from ragwright.service.problems import Problem, invalid_field
from ragwright.service.schemas import IngestBody
from ragwright.types import SourceDocument

logger = logging.getLogger("ragwright.service")

Refused = Callable[[DocumentError | ChunkingError | InputTooLong], Problem]


def _refused_field(error: DocumentError | ChunkingError | InputTooLong) -> Problem:
    return invalid_field(getattr(error, "field", "documents"), str(error))


def _document_place(document_id: str) -> str:
    return f"document {document_id!r}"


@dataclass(frozen=True)
class Ingesting:
    """Ingestions of this process."""

    application: Application
    lock: asyncio.Lock
    activity: Activity

    async def run(
        self,
        documents: tuple[SourceDocument, ...],
        key: ApiKey,
        prune: bool,
        refused: Refused = _refused_field,
        place: Callable[[str], str] = _document_place,
    ) -> IngestResult:
        """One ingestion at a time (409), within the key's write grant (403 for a stored
        document outside it), refused documents as ``refused`` names them."""
        grant = write_grant_for(key)
        if self.lock.locked():
            raise Problem(
                409,
                "ingestion-running",
                "An ingestion is running",
                "this service runs one ingestion at a time; submit again when it ends",
            )
        ingest_request = IngestRequest(
            (), documents=documents, tenant=key.tenant, prune=prune, grant=grant
        )

        def ingest() -> IngestResult:
            try:
                return self.application.ingest(ingest_request)
            except (DocumentError, ChunkingError, InputTooLong) as error:
                # Refused by the validation pass, before anything is written.
                raise refused(error) from error
            except DocumentProblems as error:  # several: named by the first
                raise refused(error.errors[0]) from error
            except OutsideGrant as error:  # it would replace a stored document outside it
                raise outside_grant_problem(error, place(error.document_id)) from error

        async with self.lock:
            # Not cancelled with the client: a run is resumable, but stopping it halfway
            # would only leave work for the next one.
            result = await guarded(asyncio.to_thread(ingest), answering=False)
        logger.info(
            "ingestion key=%s documents=%d embedded=%d deleted=%d",
            key.id,
            result.documents,
            result.embedded,
            result.deleted,
        )
        self.activity.ingested(
            key.tenant,
            {"documents": result.documents, "embedded": result.embedded, "deleted": result.deleted},
        )
        return result

    async def run_body(
        self, body: IngestBody, documents: tuple[SourceDocument, ...], key: ApiKey
    ) -> IngestResult:
        """``documents`` (``body``'s, validated) run with refusals named by their place in
        ``body`` (``documents[3].sections[1]: ...``)."""
        return await self.run(
            documents,
            key,
            body.prune,
            lambda error: ingestion_input_problem(error, body),
            lambda document_id: place_of(document_id, body),
        )

    async def ingest_body(self, body: IngestBody, key: ApiKey) -> IngestResult:
        """An ingestion body already parsed (the page's upload form): validated within
        the key's grant off the event loop, then run as the JSON route runs it."""
        documents = await asyncio.to_thread(
            documents_of,
            body,
            key.tenant,
            write_grant_for(key),
            self.application.settings.index.document_types,
        )
        return await self.run_body(body, documents, key)


def ingesting(application: App, state: State) -> Ingesting:
    return Ingesting(application, state.ingesting, state.activity)


Ingest = Annotated[Ingesting, Depends(ingesting)]


def ingestion_input_problem(
    error: DocumentError | ChunkingError | InputTooLong, body: IngestBody
) -> Problem:
    """A document the run's validation pass refused, as 422 naming it by its place in
    the request (``documents[3].sections[1]: ...``): the run wrote nothing."""
    document_id = error.document_id
    # The last document of that id: a duplicate is refused where it repeats.
    index = max(
        (i for i, d in enumerate(body.documents) if d.document_id == document_id), default=None
    )
    if index is None:
        return invalid_field("documents", str(error))
    if isinstance(error, DocumentError):
        return invalid_field(f"documents[{index}].{error.field}", error.rule)
    item = body.documents[index]
    if isinstance(error, ChunkingError):
        section = next(
            (j for j, s in enumerate(item.sections) if s.section_id == error.section_id), None
        )
        field = f"documents[{index}]" + ("" if section is None else f".sections[{section}]")
        return invalid_field(field, f"paragraph {error.paragraph_index}: {error.reason}")
    return invalid_field(
        f"documents[{index}]",
        f"chunk {error.chunk_id!r} has {error.tokens} tokens, the embedding profile allows "
        f"{error.limit}; split its paragraphs (or use a profile with a larger limit)",
    )

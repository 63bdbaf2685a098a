"""``POST /v1/ingestions`` under the caller's grant: what the body may write, the
problems a write outside the grant becomes, and what the summary may say.

A key's grant limits writes as it limits reads (:mod:`ragwright.application.grants`):
a document sent outside the allowlist is 403 ``outside-allowlist``, one of a type or a
publication state the key may not write, or one that would replace a stored document
outside the grant, 403 ``outside-grant``; nothing of the request is written. The summary
says nothing about documents outside the caller's grant: the shared-id report (which
names other tenants holding the same ids) and the collection's BM25 figures (its mean
chunk length, and the stored vectors re-encoded when the run moved it, other tenants'
among them: both would tell a tenant how much others hold and when they ingest) are the
operator's, from the command line only.
"""

from __future__ import annotations

import email.message
import json
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ragwright.application import IngestResult
from ragwright.application.grants import OutsideGrant, WriteGrant, check_documents
from ragwright.core.documents import validate_document
from ragwright.errors import DocumentError
from ragwright.service.problems import Problem, invalid_field, malformed_body
from ragwright.service.schemas import IngestBody
from ragwright.types import SourceDocument, SourceSection

# Fields of the run's summary that describe documents outside the caller's grant.
OPERATOR_ONLY_FIELDS = ("shared_ids", "bm25_avgdl", "sparse_reencoded")
# The route reads its body itself (to parse it off the event loop): its schema is
# declared here and added to the components by :func:`document_ingest_body`.
INGEST_BODY_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/IngestBody"}}},
        "required": True,
    }
}


def document_ingest_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the OpenAPI document) with :class:`IngestBody` and its parts in its
    components, as the framework adds a body it parses itself."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    definition = IngestBody.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(definition.pop("$defs", {}))
    components["IngestBody"] = definition
    return schema


def read_ingestion(
    raw: bytes,
    content_type: str | None,
    tenant: str | None,
    grant: WriteGrant,
    document_types: tuple[str, ...],
) -> tuple[IngestBody, tuple[SourceDocument, ...]]:
    """The body and its validated documents (:func:`parse_ingest_body`,
    :func:`documents_of`): CPU work the route runs in a worker thread."""
    body = parse_ingest_body(raw, content_type)
    return body, documents_of(body, tenant, grant, document_types)


def parse_ingest_body(raw: bytes, content_type: str | None) -> IngestBody:
    """``raw`` as :class:`IngestBody`, refused as the framework refuses a body it parses:
    not JSON is 400, a JSON body sent under another content type 415, a field breaking
    the schema 422 (a :class:`RequestValidationError` the problem handlers render).
    """
    if not raw:
        raise _invalid([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    data: Any = raw
    if content_type is not None and _is_json(content_type):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as error:
            raise _invalid(
                [{"type": "json_invalid", "loc": ("body", error.pos), "msg": "JSON decode error"}]
            ) from None
        except UnicodeDecodeError:
            raise malformed_body("not JSON (the body cannot be decoded)") from None
    try:
        return IngestBody.model_validate(data)
    except ValidationError as error:
        errors = [
            {"type": e["type"], "loc": ("body", *e["loc"]), "msg": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        raise _invalid(errors) from None


def _is_json(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _invalid(errors: list[dict[str, Any]]) -> RequestValidationError:
    return RequestValidationError(errors)


def documents_of(
    body: IngestBody, tenant: str | None, grant: WriteGrant, document_types: tuple[str, ...]
) -> tuple[SourceDocument, ...]:
    """The body's documents validated by the core rules (``document_types``: the ones the
    server accepts), each of the key's ``tenant`` and within its ``grant``.

    Raises:
        Problem: 422 naming the field a document breaks a rule with; 403 naming the first
            document outside the grant (nothing is written).
    """
    documents = []
    for index, item in enumerate(body.documents):
        place = f"documents[{index}]"
        if grant.outside(item.document_id, "", "") == "document_id":
            error = OutsideGrant(item.document_id, "document_id", item.document_id, ())
            raise outside_grant_problem(error, place)
        try:
            document = validate_document(
                document_id=item.document_id,
                title=item.title,
                document_type=item.document_type,
                publication_state=item.publication_state,
                sections=[
                    SourceSection(
                        s.section_id,
                        s.heading,
                        tuple(s.paragraphs),
                        None if s.pages is None else tuple(s.pages),
                    )
                    for s in item.sections
                ],
                revision=item.revision,
                source_uri=item.source_uri or "",
                tenant=tenant,
                document_types=document_types,
            )
        except DocumentError as error:
            raise invalid_field(f"documents[{index}].{error.field}", error.rule) from error
        try:
            check_documents(grant, (document,))
        except OutsideGrant as error:
            raise outside_grant_problem(error, place) from error
        documents.append(document)
    return tuple(documents)


def place_of(document_id: str, body: IngestBody) -> str:
    """Where the request holds ``document_id`` (``documents[3]``)."""
    index = next((i for i, d in enumerate(body.documents) if d.document_id == document_id), None)
    return "documents" if index is None else f"documents[{index}]"


def outside_grant_problem(error: OutsideGrant, place: str) -> Problem:
    """403 naming the document outside the grant by its ``place`` in the request
    (``documents[2].publication_state: ...``) and what the grant allows."""
    if error.part == "document_id":
        return Problem(
            403,
            "outside-allowlist",
            "Not allowed",
            f"{place}.document_id: {error.document_id!r} is outside this key's allowlist",
            field=f"{place}.document_id",
        )
    allowed = ", ".join(error.allowed)
    if error.stored:
        detail = (
            f"{place}: the stored document {error.document_id!r} has {error.part} "
            f"{error.value!r}, outside this key's grant ({error.part}: {allowed}); "
            "writing over it would change it"
        )
        field = place
    else:
        field = f"{place}.{error.part}"
        detail = f"{field}: {error.value!r} is outside this key's grant ({allowed})"
    return Problem(
        403,
        "outside-grant",
        "Not allowed",
        detail + "; nothing was written",
        field=field,
        allowed=list(error.allowed),
    )


def ingestion_summary(result: IngestResult) -> dict[str, Any]:
    """The run's summary as the caller may see it: the shape of ``ragwright ingest
    --json`` without the operator-only fields."""
    summary = result.to_dict()
    for name in OPERATOR_ONLY_FIELDS:
        summary.pop(name, None)
    return summary

"""RFC 9457 problem details: the one shape of every error the service returns.

A problem is ``application/problem+json`` with ``type``, ``title``, ``status`` and
``detail``, plus extension members where they help a client act: ``errors`` (each
``{field, rule}``) for invalid input, ``mode`` and ``reason`` when an answer was
unavailable. ``detail`` names the field and the rule; it never quotes a question,
history or answer (customer data). A refused ingestion may quote the offending metadata
value back to the caller who sent it (``'secret' is not one of [...]``); logs carry none
of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_JSON = "application/problem+json"
# A relative URI reference (RFC 9457 3.1.1): each kind is described in docs/service.md.
TYPE_BASE = "/problems/"

logger = logging.getLogger("ragwright.service")


class Problem(Exception):
    """An error response: raise it anywhere in a request, the handler renders it."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.headers = dict(headers or {})
        self.extensions = extensions

    def body(self, instance: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": TYPE_BASE + self.kind,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            out["instance"] = instance
        out.update(self.extensions)
        return out

    def response(self, instance: str | None = None) -> JSONResponse:
        return JSONResponse(
            self.body(instance),
            status_code=self.status,
            headers=self.headers,
            media_type=PROBLEM_JSON,
        )


def answer_unavailable(
    reason: str, detail: str, *, headers: Mapping[str, str] | None = None, **extensions: Any
) -> Problem:
    """``503 answer-unavailable``: no answer the service stands behind (``mode``
    ``unavailable``, with its ``reason``)."""
    return Problem(
        503,
        "answer-unavailable",
        "No answer can be given now",
        detail,
        headers=headers,
        mode="unavailable",
        reason=reason,
        **extensions,
    )


def unavailable_outcome(
    reason: str | None, *, headers: Mapping[str, str] | None = None, **extensions: Any
) -> Problem:
    """The problem for an answer whose mode is ``unavailable`` (the model did not answer
    in time and no other mode was allowed), its detail worded from ``reason``."""
    cause = (
        "the request's deadline passed before the model answered"
        if reason == "request_deadline_exceeded"
        else "the model is unavailable"
    )
    return answer_unavailable(
        reason or "model_unavailable",
        f"{cause}; no previous draft or approved template applies and evidence-only "
        "answers are turned off",
        headers=headers,
        **extensions,
    )


def invalid_field(field: str, rule: str, *, status: int = 422) -> Problem:
    """Invalid input, naming the field (dotted path, as the client spells it) and rule."""
    return Problem(
        status,
        "invalid-request",
        "The request is invalid",
        f"{field}: {rule}",
        errors=[{"field": field, "rule": rule}],
    )


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "header", "path"):
        parts = parts[1:] if len(parts) > 1 else parts
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "body"


def _validation_problem(error: RequestValidationError) -> Problem:
    errors = [
        {"field": _field_path(tuple(e.get("loc", ()))), "rule": str(e.get("msg", "invalid"))}
        for e in error.errors()
    ]
    if not errors:
        errors = [{"field": "body", "rule": "invalid"}]
    # A body that is not JSON at all is a malformed request (400); a JSON body that
    # breaks the schema is unprocessable content (422).
    for e in error.errors():
        if e.get("type") == "json_invalid":
            return malformed_body(str(e.get("msg", "JSON decode error")))
    first = errors[0]
    return Problem(
        422,
        "invalid-request",
        "The request is invalid",
        f"{first['field']}: {first['rule']}",
        errors=errors,
    )


def malformed_body(rule: str) -> Problem:
    """A body that cannot be read as JSON (400), whichever layer noticed: the field is
    the body itself (a decode error's position is not a field of the request)."""
    return Problem(
        400,
        "malformed-request",
        "The request body is not JSON",
        f"body: {rule}",
        errors=[{"field": "body", "rule": rule}],
    )


class FieldRule(BaseModel):
    field: str
    rule: str


class ProblemDetails(BaseModel):
    """RFC 9457 problem details as the service sends them (extension members vary)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="/problems/<kind>; docs/service.md lists every kind.")
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldRule] | None = Field(None, description="Invalid input: field and rule.")
    mode: str | None = Field(None, description="An unavailable answer: 'unavailable'.")
    reason: str | None = None


DESCRIPTIONS = {
    400: "Malformed body or header",
    401: "No, unknown or revoked API key",
    403: "The key may not do this",
    404: "No such resource for this caller",
    409: "Conflict with an earlier request",
    413: "The request is larger than the route allows",
    415: "The body is not sent as JSON",
    422: "A field breaks a rule, or is unknown",
    429: "The tenant's own limit",
    503: "Capacity busy, or a dependency unavailable",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route documents (their content: :func:`document_problems`)."""
    return {status: {"description": DESCRIPTIONS[status]} for status in statuses}


INTERACTIVE_ERRORS = problem_responses(400, 401, 403, 415, 422, 429, 503)
SUBMISSION_ERRORS = problem_responses(400, 401, 403, 409, 415, 422, 503)


def document_problems(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the OpenAPI document) with every error response of every operation
    described as ``application/problem+json`` with the :class:`ProblemDetails` schema
    (FastAPI's own 422 would say ``application/json`` with its validation model)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    definition = ProblemDetails.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(definition.pop("$defs", {}))
    components["ProblemDetails"] = definition
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    reference = {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("name") == "Idempotency-Key":
                    # Optional to the framework so its absence is our own 400 problem,
                    # but required by the contract.
                    parameter["required"] = True
                    parameter["schema"] = {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": "^[!-~]+$",
                    }
            for status, response in operation.get("responses", {}).items():
                if str(status)[0] in "45":
                    response["content"] = {PROBLEM_JSON: reference}
                    response["description"] = DESCRIPTIONS.get(
                        int(status), response.get("description", "")
                    )
    return schema


def install_problem_handlers(app: FastAPI) -> None:
    """Every error, including the framework's own 404/405/422 and anything unexpected,
    leaves as problem details."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, error: Problem) -> JSONResponse:
        return error.response(request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        whole_body = any(tuple(e.get("loc", ())) == ("body",) for e in error.errors())
        if (
            whole_body
            and request.method in ("POST", "PUT", "PATCH")
            and (media_type not in ("application/json", "") and not media_type.endswith("+json"))
        ):
            # A JSON body sent as a form or text is read as no object at all: say why.
            return Problem(
                415,
                "unsupported-media-type",
                "The body must be JSON",
                f"content-type: {media_type!r} is not application/json; send the body "
                "with 'content-type: application/json'",
                errors=[{"field": "content-type", "rule": "application/json"}],
            ).response(request.url.path)
        return _validation_problem(error).response(request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 400:
            # The framework's only 400 is a body it could not parse at all (bytes that
            # are not UTF-8 under a JSON content type): the documented malformed request,
            # not a kind of its own.
            return malformed_body("not JSON (the body cannot be decoded)").response(
                request.url.path
            )
        titles = {404: "Not found", 405: "Method not allowed"}
        problem = Problem(
            error.status_code,
            "http-" + str(error.status_code),
            titles.get(error.status_code, "Request failed"),
            str(error.detail),
            headers=dict(error.headers or {}),
        )
        return problem.response(request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        # Logged by type only: the exception text may quote request content.
        logger.error("unexpected %s on %s", type(error).__name__, request.url.path)
        problem = Problem(
            500, "internal", "Internal error", "the service failed unexpectedly; see its log"
        )
        return problem.response(request.url.path)

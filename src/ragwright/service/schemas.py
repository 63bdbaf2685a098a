"""Request bodies of the HTTP service (pydantic at the boundary; unknown fields refused).

A request carries only what the caller may choose: the question, the conversation so
far and a narrower document scope. Never a prompt, a model or provider, or eligibility
(tenant, allowlist, document types, publication states): those come from the caller's
API key and the server's settings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ragwright.application.requests.questions import MAX_QUESTION_CHARS, control_character


def _plain(text: str) -> str:
    problem = control_character(text)
    if problem is not None:
        raise ValueError(problem)
    return text


PlainText = Annotated[str, AfterValidator(_plain)]
"""A string without control characters other than tab and line breaks."""

MAX_HISTORY = 32
MAX_HISTORY_CHARS = 8000
MAX_SCOPE_DOCUMENTS = 100
MAX_INGEST_DOCUMENTS = 100_000


def _question() -> Any:
    return Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="The question, in the caller's words.",
        examples=["Should I drain all queued work during shutdown?"],
    )


def _document_ids() -> Any:
    return Field(
        default_factory=list,
        max_length=MAX_SCOPE_DOCUMENTS,
        description="Only these documents (within what the key may see); empty: every one.",
    )


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class HistoryMessage(_Body):
    """One earlier message of the conversation."""

    role: Literal["user", "assistant"]
    content: PlainText = Field(min_length=1, max_length=MAX_HISTORY_CHARS)


class AnswerBody(_Body):
    """``POST /v1/answers`` and ``/v1/answers/stream``."""

    question: PlainText = _question()
    history: list[HistoryMessage] = Field(
        default_factory=list,
        max_length=MAX_HISTORY,
        description="Earlier messages, oldest first, alternating user and assistant.",
    )
    documents: list[Annotated[str, Field(min_length=1, max_length=200)]] = _document_ids()


class SearchBody(_Body):
    """``POST /v1/search``."""

    question: PlainText = _question()
    k: int = Field(5, ge=1, le=50, description="How many chunks to return.")
    documents: list[Annotated[str, Field(min_length=1, max_length=200)]] = _document_ids()


class SectionBody(_Body):
    section_id: str = Field(min_length=1, max_length=200)
    heading: str = Field(max_length=1000)
    paragraphs: list[str] = Field(min_length=1, max_length=10_000)
    pages: list[int] | None = Field(
        None,
        max_length=10_000,
        description="Paged sources (PDF): the 1-based page of each paragraph, in order.",
    )


class DocumentBody(_Body):
    """One source document in the seeds' JSON shape (validated again by the core)."""

    document_id: str = Field(min_length=1, max_length=200)
    title: str = Field(min_length=1, max_length=1000)
    document_type: str = Field(min_length=1, max_length=100)
    publication_state: str = Field(min_length=1, max_length=100)
    revision: str | None = Field(None, max_length=200)
    source_uri: str | None = Field(None, max_length=2000)
    sections: list[SectionBody] = Field(min_length=1, max_length=10_000)


class IngestBody(_Body):
    """``POST /v1/ingestions``: documents of the key's tenant."""

    documents: list[DocumentBody] = Field(min_length=1, max_length=MAX_INGEST_DOCUMENTS)
    prune: bool = Field(
        False,
        description="Also delete this tenant's documents within the key's grant (its "
        "allowlist, document types and publication states) that are not in this request.",
    )

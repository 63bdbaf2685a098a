"""Failures a caller can act on, as problem details: a request that breaks a rule (422
naming the field), documents outside the key's allowlist (403), and a use case that
cannot be served now (503, ``answer-unavailable`` or ``retrieval-unavailable``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ragwright.application.callers import OutsideAllowlist
from ragwright.errors import (
    AnswerContractError,
    AssemblyError,
    ChatError,
    EmbeddingError,
    IndexNotFound,
    ProviderError,
    RequestError,
    StorageError,
    VectorIndexError,
)
from ragwright.service.problems import Problem, answer_unavailable, invalid_field

logger = logging.getLogger("ragwright.service")
T = TypeVar("T")


def checked(build: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Build a typed request; a rule it breaks is invalid input naming the field, and
    documents outside the key's allowlist are refused (403), never silently dropped."""
    try:
        return build(*args, **kwargs)
    except RequestError as error:
        raise invalid_field(error.field, error.rule) from error
    except OutsideAllowlist as error:
        raise Problem(403, "outside-allowlist", "Not allowed", str(error)) from error


def unavailable(reason: str, detail: str, *, answering: bool, **extensions: Any) -> Problem:
    """503 with ``reason``: an answer that cannot be given (``answer-unavailable``, with
    ``mode``), or else a search, status or ingestion that cannot be served
    (``retrieval-unavailable``: not about an answer, no ``mode``)."""
    if answering:
        return answer_unavailable(reason, detail, **extensions)
    return Problem(
        503,
        "retrieval-unavailable",
        "The index cannot be used now",
        detail,
        reason=reason,
        **extensions,
    )


def assembly_field(reason: str) -> tuple[str, str]:
    """The request field an assembly refusal is about: the history (``history[3]: ...``)
    or the question (it alone exceeds the model's window)."""
    head, _, rest = reason.partition(": ")
    if head.startswith("history") and rest:
        return head, rest
    if reason.startswith("instructions and question"):
        return "question", f"too long for the model's window ({reason})"
    return "history" if "history" in reason else "question", reason


async def guarded(work: Awaitable[T], *, answering: bool = True) -> T:
    """Run a use case; turn the failures a caller can act on into problem details
    (``answering`` false: a search, status or ingestion, whose refusals are not about an
    answer: kind ``retrieval-unavailable``, no ``mode``)."""

    def down(reason: str, detail: str, **extensions: Any) -> Problem:
        return unavailable(reason, detail, answering=answering, **extensions)

    try:
        return await work
    except RequestError as error:
        raise invalid_field(error.field, error.rule) from error
    except AssemblyError as error:
        raise invalid_field(*assembly_field(error.reason)) from error
    except IndexNotFound as error:
        raise down("retrieval_unavailable", "no documents have been ingested yet") from error
    except (VectorIndexError, StorageError, EmbeddingError) as error:
        logger.error("retrieval unavailable: %s", type(error).__name__)
        raise down(
            "retrieval_unavailable", f"the evidence index cannot be read ({type(error).__name__})"
        ) from error
    except (ChatError, AnswerContractError) as error:
        category = error.category.value if isinstance(error, ChatError) else "invalid_output"
        logger.error("model failed: %s", category)
        raise down(
            "model_unavailable", f"the model failed ({category})", failure_category=category
        ) from error
    except ProviderError as error:  # a remote embedder or reranker
        logger.error("retrieval provider failed: %s", error.category.value)
        raise down(
            "retrieval_unavailable",
            f"a retrieval provider failed ({error.category.value})",
            failure_category=error.category.value,
        ) from error

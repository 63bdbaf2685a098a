"""The answer use case's result in its stable JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragwright.pipeline.answer import AnswerResult


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """An answer (or the reason there is none) and the request options that shaped it.

    ``to_dict`` is the documented JSON form (docs/application.md): the pipeline result's
    form (``AnswerResult.to_dict``) with ``options`` extended by the request's own
    (eligibility, tenant, history, deadline). The same for ``ragwright ask --json`` and
    the HTTP service.
    """

    result: AnswerResult
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.result.status

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        out["options"] = {**(out.get("options") or {}), **self.options}
        return out

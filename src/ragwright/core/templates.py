"""Approved templates: reviewed text offered for a question class when the model is down.

A template is the "deterministic non-AI path" of the degradation contract: its text and
its selection rule are written and reviewed by people, so they can be tested like any
other code. It does less than a generated answer and never pretends to be one: the
result carries it under ``template`` with mode ``approved_template``, and ``answer``
stays empty.

The selection rule is deliberately plain: a template applies to a question that contains
one of its phrases (case-insensitive, on word boundaries). The first template in file
order that matches wins, so a reviewer reads the file top to bottom as the decision
table. A question no template matches gets no template (the next mode applies).

The file (YAML or JSON, ``RAGWRIGHT_TEMPLATES``)::

    templates:
      - id: refund-acknowledgement
        version: "3"
        phrases: ["refund", "money back"]
        text: "We have your refund question and a support agent will reply ..."
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragwright.errors import ConfigError

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FIELDS = frozenset({"id", "version", "phrases", "text"})


@dataclass(frozen=True, slots=True)
class ApprovedTemplate:
    """One reviewed text and the phrases that select it."""

    template_id: str
    version: str
    phrases: tuple[str, ...]
    text: str

    def matches(self, question: str) -> bool:
        lowered = question.casefold()
        return any(
            re.search(rf"(?<!\w){re.escape(phrase.casefold())}(?!\w)", lowered)
            for phrase in self.phrases
        )

    def to_dict(self) -> dict[str, str]:
        return {"id": self.template_id, "version": self.version, "text": self.text}


def parse_templates(data: object, source: str) -> tuple[ApprovedTemplate, ...]:
    """Templates from a parsed file, or :class:`ConfigError` naming the entry and field.

    Raises:
        ConfigError: the file's shape, a missing or unknown field, an empty phrase list,
            or an id used twice.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("templates"), list):
        raise ConfigError(source, "must hold a 'templates' list")
    templates: list[ApprovedTemplate] = []
    seen: set[str] = set()
    for index, entry in enumerate(data["templates"]):
        where = f"{source}: templates[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(where, "must be a mapping with id, version, phrases and text")
        unknown = sorted(set(entry) - _FIELDS)
        if unknown:
            raise ConfigError(
                f"{where}.{unknown[0]}", f"unknown field (allowed: {sorted(_FIELDS)})"
            )
        template_id = _text(entry, "id", where)
        if not _ID.match(template_id):
            raise ConfigError(
                f"{where}.id", "letters, digits, '.', '_' or '-', at most 64 characters"
            )
        if template_id in seen:
            raise ConfigError(f"{where}.id", f"{template_id!r} is used twice")
        seen.add(template_id)
        phrases = entry.get("phrases")
        if (
            not isinstance(phrases, Sequence)
            or isinstance(phrases, str)
            or not phrases
            or not all(isinstance(p, str) and p.strip() for p in phrases)
        ):
            raise ConfigError(f"{where}.phrases", "a non-empty list of non-blank phrases")
        templates.append(
            ApprovedTemplate(
                template_id,
                _text(entry, "version", where),
                tuple(p.strip() for p in phrases),
                _text(entry, "text", where),
            )
        )
    return tuple(templates)


def select_template(
    templates: Sequence[ApprovedTemplate], question: str
) -> ApprovedTemplate | None:
    """The first template whose phrases occur in ``question``, else ``None``."""
    return next((t for t in templates if t.matches(question)), None)


def _text(entry: Mapping[str, object], field: str, where: str) -> str:
    value = entry.get(field)
    if isinstance(value, int | float) and not isinstance(value, bool) and field == "version":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{field}", "required, a non-blank string")
    return value.strip()

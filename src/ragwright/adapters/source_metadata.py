"""The metadata of a document read from a file: where each field comes from.

For every field the first of these that gives it wins:

=====================  =============================================================
field                  origins, first wins
=====================  =============================================================
``document_id``        front matter; else the file's path below the source folder
                       (Markdown without ``.md``: ``alerts/etcd``; other formats with
                       their extension: ``guides/backup.pdf``, so ``backup.pdf`` and
                       ``backup.docx`` stay two documents)
``title``              front matter; else the document (first heading, PDF/DOCX
                       metadata, HTML ``<title>``, a text file's first line); else the
                       file name without its extension (``index`` for ``docs/index.md``)
``document_type``,     front matter; else the first rule of the folder's rules file
``publication_state``, whose glob matches the file's path and gives the field; else the
``tenant``             command line (``--type``, ``--state``, ``--tenant``); else the
                       default (``runbook``, ``published``: what the default
                       eligibility searches, reported as ``default``); a missing
                       tenant leaves the document untenanted
=====================  =============================================================

The rules file is ``ragwright-sources.toml`` at the top of a source folder (for a file
given by name, in its folder)::

    [[rules]]
    glob = "runbooks/*"          # fnmatch on the path below the folder; * crosses /
    document_type = "runbook"
    publication_state = "published"

    [[rules]]
    glob = "*"
    document_type = "note"
    tenant = "acme"

Unknown keys, a rule without ``glob`` and values that are not strings are refused,
naming the file and the rule.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragwright.adapters.formats.converted import ConvertedDocument, build_sections
from ragwright.core.documents import validate_document
from ragwright.errors import DocumentError, SourceError
from ragwright.types import (
    DEFAULT_DOCUMENT_TYPES,
    PUBLICATION_STATES,
    UNLABELLED_STATE,
    UNLABELLED_TYPE,
    DocumentOrigin,
    SourceDocument,
)

RULES_FILE = "ragwright-sources.toml"
RULE_FIELDS = ("document_type", "publication_state", "tenant")
_OPTIONS = {"document_type": "--type", "publication_state": "--state", "tenant": "--tenant"}
_UNLABELLED = {"document_type": UNLABELLED_TYPE, "publication_state": UNLABELLED_STATE}


@dataclass(frozen=True, slots=True)
class SourceDefaults:
    """Metadata applied where a source file does not give it (``--type`` ...)."""

    document_type: str | None = None
    publication_state: str | None = None
    tenant: str | None = None
    document_types: tuple[str, ...] = DEFAULT_DOCUMENT_TYPES

    @property
    def type_or_default(self) -> str:
        """``--type``, else the type of documents nothing labels."""
        return self.document_type or UNLABELLED_TYPE

    @property
    def state_or_default(self) -> str:
        """``--state``, else the state of documents nothing labels."""
        return self.publication_state or UNLABELLED_STATE


@dataclass(frozen=True, slots=True)
class SourceRule:
    """One ``[[rules]]`` entry: a glob and the fields it gives."""

    glob: str
    fields: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class SourceRules:
    """A folder's rules file, read once per pass; ``path`` is where it is or would be."""

    path: Path = Path(RULES_FILE)
    rules: tuple[SourceRule, ...] = ()

    def lookup(self, relative: str, field: str) -> tuple[str, str] | None:
        """(value, origin) of the first rule matching ``relative`` that gives ``field``."""
        for rule in self.rules:
            if field in rule.fields and fnmatch.fnmatchcase(relative, rule.glob):
                return rule.fields[field], f"rule {rule.glob!r} in {self.path}"
        return None


def read_rules(folder: Path) -> SourceRules:
    """The rules of ``folder``'s :data:`RULES_FILE`, if it has one.

    Raises:
        SourceError: the file is not valid TOML or breaks a rule (named in the message).
    """
    path = folder / RULES_FILE
    if not path.is_file():
        return SourceRules(path)
    try:
        data = tomllib.loads(path.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise SourceError(str(path), f"not a readable rules file: {error}") from error
    unknown = sorted(set(data) - {"rules"})
    if unknown or not isinstance(data.get("rules", []), list):
        raise SourceError(str(path), 'the file holds only [[rules]] tables (glob = "...", ...)')
    rules = []
    for index, entry in enumerate(data.get("rules", [])):
        where = f"rules[{index}]"
        if not isinstance(entry, dict):
            raise SourceError(str(path), f"{where}: must be a table")
        extra = sorted(set(entry) - {"glob", *RULE_FIELDS})
        if extra:
            raise SourceError(
                str(path), f"{where}: unknown keys {extra}; allowed: glob, {', '.join(RULE_FIELDS)}"
            )
        for key, value in entry.items():
            if not isinstance(value, str) or not value.strip():
                raise SourceError(str(path), f"{where}.{key}: must be a non-blank string")
        if "glob" not in entry:
            raise SourceError(str(path), f"{where}: needs a glob")
        rules.append(
            SourceRule(entry["glob"], {k: v for k, v in entry.items() if k in RULE_FIELDS})
        )
    return SourceRules(path, tuple(rules))


def _field(
    name: str,
    front_matter: Mapping[str, Any],
    rules: SourceRules,
    relative: str,
    defaults: SourceDefaults,
) -> tuple[Any, str]:
    if name in front_matter:
        return front_matter[name], "front matter"
    ruled = rules.lookup(relative, name)
    if ruled is not None:
        return ruled
    given = getattr(defaults, name)
    if given is not None:
        return given, _OPTIONS[name]
    unlabelled = _UNLABELLED.get(name)
    return (unlabelled, "default") if unlabelled is not None else (None, "none")


def build_document(
    converted: ConvertedDocument,
    path: Path,
    relative: str,
    defaults: SourceDefaults,
    rules: SourceRules,
    *,
    document_id: str,
) -> tuple[SourceDocument, DocumentOrigin]:
    """The validated document and where its metadata came from.

    ``relative`` is the file's path below the source folder (what rule globs match);
    ``document_id`` the id the path gives.

    Raises:
        DocumentError: the document breaks a validation rule.
    """
    front = converted.front_matter
    values = {name: _field(name, front, rules, relative, defaults) for name in RULE_FIELDS}
    problems = [_value_problem(name, values[name], defaults) for name in _CONTROLLED]
    if any(problems):
        raise SourceError(str(path), "; ".join(p for p in problems if p))
    title, title_from = converted.title, converted.title_from
    if title is None:
        title, title_from = path.stem, "file name"
    doc_id, id_from = (
        (front["document_id"], "front matter") if "document_id" in front else (document_id, "path")
    )
    sections = build_sections(str(title), converted.sections)
    document = validate_document(
        document_id=doc_id,
        title=title,
        document_type=values["document_type"][0],
        publication_state=values["publication_state"][0],
        sections=sections,
        revision=front.get("revision"),
        source_uri=str(front.get("source_uri", path.as_posix())),
        tenant=values["tenant"][0],
        document_types=defaults.document_types,
    )
    origin = DocumentOrigin(
        document_id=document.document_id,
        source=path.as_posix(),
        title=document.title,
        document_type=document.document_type,
        publication_state=document.publication_state,
        tenant=document.tenant,
        id_from=id_from,
        title_from=title_from or "none",
        type_from=values["document_type"][1],
        state_from=values["publication_state"][1],
        tenant_from=values["tenant"][1],
    )
    return document, origin


_CONTROLLED = ("document_type", "publication_state")


def _value_problem(name: str, given: tuple[Any, str], defaults: SourceDefaults) -> str | None:
    """A type or state that is not one of the controlled values, with the fix where it
    was given (front matter, a rule, an option), a near spelling if there is one, and
    for a type, the setting that adds it. ``None`` when the value is fine."""
    value, origin = given
    allowed = defaults.document_types if name == "document_type" else PUBLICATION_STATES
    if not isinstance(value, str) or value in allowed:
        return None  # a non-string is the validation's to name
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)
    where = {"front matter": "the file's front matter", "default": "the default"}.get(
        origin, origin
    )
    problem = f"{name} {value!r} (from {where}) is not one of {list(allowed)}"
    if close:
        problem += f": did you mean {close[0]!r}?"
    if name == "document_type":
        added = json.dumps([*allowed, value])
        problem += (
            f"{';' if close else ':'} to add {value!r} as a new type, set "
            f"RAGWRIGHT_DOCUMENT_TYPES='{added}' (or document_types in ./ragwright.toml) "
            "for every command"
        )
    return problem


def check_defaults(defaults: SourceDefaults) -> None:
    """``--type``/``--state`` checked once, before any file: a value every file would
    take is one problem of the command line, not one per file.

    Raises:
        SourceError: naming the option, with its fix.
    """
    for name in _CONTROLLED:
        option = _OPTIONS[name]
        problem = _value_problem(name, (getattr(defaults, name), option), defaults)
        if problem is not None:
            raise SourceError(option, problem.replace(f" (from {option})", "", 1))


def fix_for(error: DocumentError, rules_file: str) -> str:
    """The option that fixes a document's metadata problem, when one does."""
    if error.field == "document_type":
        return f" (--type, a rule in {rules_file}, or RAGWRIGHT_DOCUMENT_TYPES for new types)"
    if error.field == "publication_state":
        return f" (--state or a rule in {rules_file})"
    if error.field == "tenant":
        return f" (--tenant or a rule in {rules_file})"
    return ""

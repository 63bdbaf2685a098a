"""Evaluation datasets: our JSONL format and BEIR ``queries.jsonl`` + ``qrels/<split>.tsv``.

JSONL, one case per line (docs/evaluation.md)::

    {"id": "q01", "category": "procedure", "question": "...",
     "relevant": [{"document_id": "worker-shutdown", "chunk_id": "shutdown-and-the-queue/p0",
                   "grade": 2}]}
    {"id": "u01", "category": "unsupported", "question": "...", "unsupported": true}

``chunking_version`` may be given per key; chunk keys without it mean the run's version.
A case's keys are all chunk-level or all document-level. Grades are 1 (partially
relevant) or 2 (relevant). Answerable cases may add ``reference_answers`` (a list of
non-blank strings) and ``reference_sentences`` (a list of non-empty lists of non-blank
strings: per reference, the evidence sentences it was written from) for answer runs.
Everything is validated before a run starts.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ragwright.errors import EvaluationError
from ragwright.types import EvalCase, RelevantKey


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty or only whitespace")
    return text


# A reference text: at least one character that is not whitespace.
_Text = Annotated[str, AfterValidator(_not_blank)]


class _Key(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document_id: str = Field(min_length=1)
    chunk_id: str | None = Field(None, min_length=1)
    chunking_version: str | None = Field(None, min_length=1)
    grade: int = Field(ge=1, le=2)


class _Case(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    question: str = Field(min_length=1)
    relevant: list[_Key] = []
    unsupported: bool = False
    reference_answers: list[_Text] = []
    reference_sentences: list[Annotated[list[_Text], Field(min_length=1)]] = []


def load_cases(path: Path) -> list[EvalCase]:
    """Cases from a JSONL dataset, validated as a whole.

    Raises:
        EvaluationError: naming the line and the rule (bad JSON, unknown field, grade out
            of range, duplicate case id or key, empty relevant set, mixed levels, blank
            reference text, references on an unsupported case).
    """
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as error:
        raise EvaluationError(f"{path}: cannot read: {error}") from error
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = _Case.model_validate(json.loads(line))
        except ValueError as error:
            detail = error.errors()[0] if isinstance(error, ValidationError) else None
            field = ".".join(str(p) for p in detail["loc"]) if detail else "line"
            message = detail["msg"] if detail else str(error)
            raise EvaluationError(f"{where}: field {field!r}: {message}") from error
        if raw.id in seen:
            raise EvaluationError(f"{where}: duplicate case id {raw.id!r}")
        seen.add(raw.id)
        if raw.unsupported and raw.relevant:
            raise EvaluationError(
                f"{where}: unsupported case {raw.id!r} must not list relevant keys"
            )
        if raw.unsupported and (raw.reference_answers or raw.reference_sentences):
            raise EvaluationError(
                f"{where}: unsupported case {raw.id!r} must not list reference answers or sentences"
            )
        if not raw.unsupported and not raw.relevant:
            raise EvaluationError(f"{where}: case {raw.id!r} has an empty relevant set")
        keys = [(k.document_id, k.chunking_version, k.chunk_id) for k in raw.relevant]
        if len(set(keys)) != len(keys):
            raise EvaluationError(f"{where}: case {raw.id!r} lists a relevant key twice")
        if len({k.chunk_id is None for k in raw.relevant}) > 1:
            raise EvaluationError(f"{where}: case {raw.id!r} mixes chunk and document keys")
        cases.append(
            EvalCase(
                case_id=raw.id,
                category=raw.category,
                question=raw.question,
                relevant=tuple(
                    RelevantKey(k.document_id, k.grade, k.chunk_id, k.chunking_version)
                    for k in raw.relevant
                ),
                unsupported=raw.unsupported,
                reference_answers=tuple(raw.reference_answers),
                reference_sentences=tuple(tuple(s) for s in raw.reference_sentences),
            )
        )
    if not cases:
        raise EvaluationError(f"{path}: no cases")
    return cases


def load_beir_cases(directory: Path, split: str) -> list[EvalCase]:
    """Document-level cases for the queries judged in ``qrels/<split>.tsv``."""
    qrels_path = directory / "qrels" / f"{split}.tsv"
    queries_path = directory / "queries.jsonl"
    for required in (qrels_path, queries_path):
        if not required.is_file():
            raise EvaluationError(f"BEIR directory {directory}: missing {required.name}")
    judged: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if number == 1 and row and row[0] == "query-id":
                continue
            try:
                query_id, doc_id, score = row[0], row[1], int(row[2])
            except (IndexError, ValueError) as error:
                raise EvaluationError(
                    f"{qrels_path}:{number}: not 'query-id corpus-id score'"
                ) from error
            if score > 0:
                judged.setdefault(query_id, {})[doc_id] = min(score, 2)
    questions: dict[str, str] = {}
    with queries_path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                questions[str(row["_id"])] = str(row["text"])
    missing = sorted(set(judged) - set(questions))
    if missing:
        raise EvaluationError(f"{qrels_path}: queries not in queries.jsonl: {missing[:5]}")
    return [
        EvalCase(
            case_id=query_id,
            category=split,
            question=questions[query_id],
            relevant=tuple(
                RelevantKey(doc, grade) for doc, grade in sorted(judged[query_id].items())
            ),
        )
        for query_id in sorted(judged, key=lambda q: (len(q), q))
    ]

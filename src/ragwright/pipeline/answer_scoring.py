"""Answer runs: one answer outcome scored against its labelled case, and a run's summary.

The one implementation ``eval run --answers`` and ``benchmarks/answers.py`` share. It
reads the answer use case's JSON form (``AnswerOutcome.to_dict``), so a persisted
outcome can be scored again without the model.

Per case (:func:`score_answer`, persisted as ``case["answer"]``)::

    {"style": "quoted", "status": "answered", "text": "...", "withheld": null,
     "citations": [{"label": "S1", "document_id": "...", "chunk_id": "..."}],
     "references": ["..."], "token_f1": 0.71, "rouge_l": 0.64, "gold_cited": true,
     "latency_ms": 1840.2, "support": "supported", "invalid_citations": 0,
     "quotes": ["E1"], "answerability": 0.82,
     "sentences": {"selected": 1, "precision": 1.0, "recall": 0.5}}

* ``token_f1`` / ``rouge_l`` (:mod:`ragwright.core.answer_metrics`) score ``text`` against
  ``references`` when the status is ``answered`` and the case has references, else null.
* ``gold_cited``: a citation names a relevant key of the case (its chunk; its document
  for document-level cases); null when the case has no relevant keys (unsupported).
* ``support``: the support check's verdict — ``supported`` (every claim supported and
  every cited source supports one), ``flagged`` (supported, but a cited source supports
  nothing), ``unsupported`` (the check failed) or ``not_checked`` (no check ran: no
  generated answer, or the check is off).
* ``invalid_citations``: citations whose label is not among the outcome's sources.
* ``quotes``: the ids of the evidence sentences the outcome selected (quoted answers and
  evidence-only results; empty otherwise); ``answerability``: the answerability score
  (question against its best evidence sentence), null when none was computed.
* ``sentences``: ``{"selected", "precision", "recall"}`` — how many sentences were
  selected and their precision/recall against the case's ``reference_sentences`` (null
  when the case has none, or is unsupported); null for the generated style, which
  selects no sentences.
* A provider failure is recorded as status ``error`` with its reason in ``error``.

The summary (:func:`summarise_answers`, persisted as the run's top-level ``answers``) is
documented in docs/evaluation.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ragwright.core.answer_metrics import SentenceScores, rouge_l, sentence_selection, token_f1
from ragwright.pipeline.evaluate import Key, RunRecord, label_keys
from ragwright.types import EvalCase

ANSWERED = "answered"
ERROR = "error"
VERDICTS = ("supported", "flagged", "unsupported", "not_checked")


def score_answer(
    case: EvalCase,
    outcome: Mapping[str, Any],
    *,
    latency_ms: float,
    chunking_version: str,
) -> dict[str, Any]:
    """The persisted answer record of ``outcome`` (an ``AnswerOutcome.to_dict()``, or an
    :func:`error_outcome`) for ``case``; labels without a chunking version mean
    ``chunking_version``."""
    status = str(outcome["status"])
    text = str(outcome.get("answer") or "")
    references = list(case.reference_answers)
    scored = status == ANSWERED and bool(references)
    labels = label_keys(case, chunking_version)
    citations = list(outcome.get("citations") or [])
    sources = {s["label"] for s in outcome.get("sources") or []}
    row: dict[str, Any] = {
        "style": outcome.get("style"),
        "status": status,
        "text": text,
        "withheld": outcome.get("withheld_answer"),
        "citations": [
            {
                "label": c["label"],
                "document_id": c["document_id"],
                "chunk_id": c["chunk_id"],
                # The file and pages, for the report: only where the source names a file.
                **({"location": c["location"]} if c.get("location") else {}),
            }
            for c in citations
        ],
        "references": references,
        "token_f1": token_f1(text, references) if scored else None,
        "rouge_l": rouge_l(text, references) if scored else None,
        "gold_cited": (
            any(_citation_key(c, case, chunking_version) in labels for c in citations)
            if labels
            else None
        ),
        "latency_ms": round(latency_ms, 1),
        "support": support_verdict(outcome.get("support")),
        "invalid_citations": sum(1 for c in citations if c["label"] not in sources),
        "quotes": [str(quote["id"]) for quote in outcome.get("quotes") or []],
        "answerability": (outcome.get("answerability") or {}).get("score"),
        "sentences": _sentence_row(outcome, case),
    }
    if status == ERROR:
        row["error"] = outcome.get("error")
    return row


def error_outcome(reason: str, style: str | None) -> dict[str, Any]:
    """The outcome recorded for a question whose answer failed at the provider."""
    return {
        "status": ERROR,
        "answer": "",
        "withheld_answer": None,
        "citations": [],
        "sources": [],
        "support": None,
        "style": style,
        "error": reason,
    }


def support_verdict(support: Mapping[str, Any] | None) -> str:
    """One of :data:`VERDICTS` for an outcome's ``support`` object."""
    if support is None:
        return "not_checked"
    if not support["supported"]:
        return "unsupported"
    return "flagged" if support["flagged"] else "supported"


def score_sentences(selected: Sequence[str], case: EvalCase) -> SentenceScores | None:
    """Sentence selection of ``selected`` against the case's reference selections; None
    when the case has none."""
    if not case.reference_sentences:
        return None
    return sentence_selection(selected, case.reference_sentences)


def selected_sentences(outcome: Mapping[str, Any]) -> list[str] | None:
    """The evidence sentences an outcome selected (its ``quotes``: quoted answers and
    evidence-only results); None when its style selects none (generated)."""
    if outcome.get("style") == "generated":
        return None
    return [str(quote["text"]) for quote in outcome.get("quotes") or []]


def _sentence_row(outcome: Mapping[str, Any], case: EvalCase) -> dict[str, Any] | None:
    """How many sentences the outcome selected and, for an answerable case with reference
    selections, their precision and recall; None when the style selects none."""
    selected = selected_sentences(outcome)
    if selected is None:
        return None
    scores = None if case.unsupported else score_sentences(selected, case)
    return {
        "selected": len(selected),
        "precision": scores.precision if scores is not None else None,
        "recall": scores.recall if scores is not None else None,
    }


def summarise_answers(
    cases: Sequence[EvalCase], rows: Sequence[Mapping[str, Any]], *, style: str | None
) -> dict[str, Any]:
    """The run's ``answers`` summary of ``rows[i]`` (from :func:`score_answer`) for
    ``cases[i]``; ``style`` is the requested style (null: the configured default)."""
    answerable = [r for c, r in zip(cases, rows, strict=True) if not c.unsupported]
    unsupported = [r for c, r in zip(cases, rows, strict=True) if c.unsupported]
    answered = [r for r in answerable if r["status"] == ANSWERED]
    cited = [r for r in answered if r["gold_cited"]]
    referenced = [r for r in answerable if r["references"]]
    declined = [r for r in unsupported if r["status"] != ANSWERED]
    latencies = sorted(float(r["latency_ms"]) for r in rows)
    verdicts = Counter(str(r["support"]) for r in rows)
    return {
        "style": style,
        "cases": len(rows),
        "answerable": {
            "cases": len(answerable),
            "answered": len(answered),
            "answered_rate": _rate(len(answered), len(answerable)),
            "gold_cited": len(cited),
            "gold_cited_rate": _rate(len(cited), len(answered)),
            "with_references": len(referenced),
            "token_f1": _means(referenced, "token_f1"),
            "rouge_l": _means(referenced, "rouge_l"),
            "sentences": _sentence_means(answerable),
        },
        "unsupported": {
            "cases": len(unsupported),
            "declined": len(declined),
            "declined_rate": _rate(len(declined), len(unsupported)),
        },
        "invalid_citations": sum(int(r["invalid_citations"]) for r in rows),
        "support": {verdict: verdicts.get(verdict, 0) for verdict in VERDICTS},
        "statuses": dict(sorted(Counter(str(r["status"]) for r in rows).items())),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
    }


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of sorted values, interpolating linearly between the
    closest ranks (numpy's default); None for no values."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    value = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return round(value, 1)


def _means(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[str, float | None]:
    """Mean over answered rows, and over all rows with unanswered counted as 0."""
    values = [float(r[metric]) for r in rows if r[metric] is not None]
    return {
        "answered": sum(values) / len(values) if values else None,
        "all": sum(values) / len(rows) if rows else None,
    }


def _sentence_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Sentence selection over the answerable rows with reference selections that
    selected sentences: their count and mean precision and recall (null: none)."""
    selections = [r["sentences"] for r in rows if r.get("sentences")]
    scored = [s for s in selections if s["selected"] and s["precision"] is not None]
    return {
        "scored": len(scored),
        "precision": sum(s["precision"] for s in scored) / len(scored) if scored else None,
        "recall": sum(s["recall"] for s in scored) / len(scored) if scored else None,
    }


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def _citation_key(citation: Mapping[str, Any], case: EvalCase, chunking_version: str) -> Key:
    if case.level == "document":
        return (str(citation["document_id"]),)
    return (
        str(citation["document_id"]),
        str(citation.get("chunking_version") or chunking_version),
        str(citation["chunk_id"]),
    )


def attach_answers(
    record: RunRecord,
    cases: Sequence[EvalCase],
    rows: Sequence[dict[str, Any]],
    *,
    style: str | None,
) -> None:
    """Put ``rows[i]`` on ``cases[i]``'s row of ``record`` as ``answer`` (answerable cases
    in ``cases``, unsupported ones in ``unsupported["results"]``) and the summary in
    ``record.answers``."""
    by_id = {case.case_id: row for case, row in zip(cases, rows, strict=True)}
    for entry in (*record.cases, *record.unsupported.get("results", ())):
        entry["answer"] = by_id[entry["id"]]
    record.answers = summarise_answers(cases, rows, style=style)

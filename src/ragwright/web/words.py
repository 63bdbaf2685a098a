"""The plain words the page shows for each answer mode and reason (one place: the
templates render them and hand them to the script as JSON)."""

from __future__ import annotations

MODE_WORDS: dict[str, str] = {
    "generated": "Answered",
    "quoted": "Quoted from the evidence",
    "insufficient": "The evidence does not answer this",
    "evidence_only": "Evidence only — NOT AN ANSWER",
    "previous_draft": "Previous draft, {age} old",
    "approved_template": "Approved template — not an answer from the evidence",
    "unavailable": "Unavailable",
    "interrupted": "Interrupted — the answer did not finish",
}

REASON_WORDS: dict[str, str] = {
    "model_unavailable": "the model is unavailable",
    "request_deadline_exceeded": "the time allowed for this question ran out",
    "required_evidence_unavailable": "no document you may see holds evidence for this",
    "evidence_does_not_answer": "the passages found do not answer the question",
    "answer_not_supported": (
        "the model's answer was not supported by the passages it cited, so it is not shown"
    ),
    "retrieval_unavailable": "the document index cannot be read now",
}


def reason_words(reason: str | None) -> str:
    """``reason`` in plain words (the code itself when it has none)."""
    if reason is None:
        return ""
    return REASON_WORDS.get(reason, reason.replace("_", " "))

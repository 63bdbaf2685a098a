"""Kill a real ``ragwright ingest`` process mid-run, repeatedly, and check convergence.

Between kills, every document's visible (live) chunks must be a subset of one revision;
after a final uninterrupted run, the index must equal a clean ingestion of the new
corpus, point for point and payload for payload.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.embedders.onnx import MINILM_PROFILE
from ragwright.adapters.sources import load_sources
from ragwright.core.chunking import build_chunks
from ragwright.core.contracts import contract_for
from ragwright.types import ChunkingPolicy, FieldMatch, PointFilter
from tests.processes import CHILD_TIMEOUT

POLICY = ChunkingPolicy()


def write_corpus(root: Path, version: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*.md"):
        old.unlink()
    count = 36 if version == 1 else 40
    for i in range(count):
        if version == 2 and i % 9 == 0:
            continue  # deleted in v2 (pruned)
        edited = version == 2 and i % 4 != 0
        state = "published" if (version == 2 or i % 2) else "draft"
        lines = [
            "---",
            f"document_id: doc-{i:03d}",
            "document_type: runbook",
            f"publication_state: {state}",
            "---",
            f"# Procedure {i}",
            "",
        ]
        for section in range(3):
            lines += [f"## Step group {section}", ""]
            for paragraph in range(3):
                change = (
                    " This sentence was revised for the second edition."
                    if edited and paragraph == 1
                    else ""
                )
                lines += [
                    f"Step {paragraph} of group {section} in procedure {i}: check the service, "
                    f"record the result and continue only when the previous check passed.{change}",
                    "",
                ]
        (root / f"doc-{i:03d}.md").write_text("\n".join(lines), "utf-8")


def texts_by_document(root: Path) -> dict[str, set[str]]:
    return {d.document_id: {c.text for c in build_chunks(d, POLICY)} for d in load_sources([root])}


def ingest_cmd(corpus: Path) -> list[str]:
    return [sys.executable, "-m", "ragwright", "ingest", str(corpus), "--prune", "--json"]


def ingest_report(corpus: Path, env: dict[str, str]) -> dict[str, Any]:
    """``ingest CORPUS --prune --json`` run to its end (it must succeed): its report."""
    done = subprocess.run(
        ingest_cmd(corpus),
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    return cast(dict[str, Any], json.loads(done.stdout))


def snapshot(home: Path) -> list[tuple[str, str]]:
    with EdgeIndex(
        home / "index" / "support-documents", contract_for(MINILM_PROFILE, POLICY.version)
    ) as index:
        return sorted(
            (str(p.point_id), json.dumps(p.payload, sort_keys=True)) for p in index.scroll()
        )


def live_texts(home: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    with EdgeIndex(
        home / "index" / "support-documents", contract_for(MINILM_PROFILE, POLICY.version)
    ) as index:
        for point in index.scroll(PointFilter(must=(FieldMatch("index_state", ("live",)),))):
            found.setdefault(point.payload["document_id"], set()).add(point.payload["text"])
    return found


@pytest.mark.slow
def test_killed_ingestion_converges_and_never_shows_a_mix(tmp_path: Path) -> None:
    env = {**os.environ, "RAGWRIGHT_HOME": str(tmp_path / "home"), "RAGWRIGHT_BATCH_SIZE": "8"}
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 1)
    v1 = texts_by_document(corpus)
    ingest_report(corpus, env)

    write_corpus(corpus, 2)
    v2 = texts_by_document(corpus)
    kills = 0
    # Each killed run leaves its progress, so later runs have less left to do: start
    # early enough that a fast, quiet machine is still caught mid-run at least twice.
    for delay in (0.8, 1.2, 1.6, 2.0, 2.8, 3.6):
        process = subprocess.Popen(
            ingest_cmd(corpus), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        time.sleep(delay)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.communicate(timeout=300)
        for document_id, visible in live_texts(tmp_path / "home").items():
            old, new = v1.get(document_id, set()), v2.get(document_id, set())
            assert visible <= old or visible <= new, (
                f"{document_id} shows a mix after a kill at {delay}s"
            )
            if not old:  # new in v2, written live in one upsert: whole or absent
                assert visible == new, f"{document_id} is partly live after {delay}s"
    assert kills >= 2, "the run finished before it could be killed; the corpus is too small"

    report = ingest_report(corpus, env)
    assert report["chunks"] == sum(len(t) for t in v2.values())

    clean_env = {**env, "RAGWRIGHT_HOME": str(tmp_path / "clean")}
    ingest_report(corpus, clean_env)
    assert snapshot(tmp_path / "home") == snapshot(tmp_path / "clean")

    assert ingest_report(corpus, env)["embedded"] == 0

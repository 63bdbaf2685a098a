"""``benchmarks/ingest_scale.py --steps`` on a small corpus (issue 25, item 1).

The per-step timers name functions of the write path by module and attribute; when a
module was split they named functions that had moved, and ``--steps`` stopped with an
AttributeError for a session before anyone noticed. This runs it as a user does, on 200
synthetic documents (a few seconds), and checks every step of the split was timed.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO
from tests.processes import CHILD_TIMEOUT

# Steps every first ingestion of new documents goes through (a fresh index: no
# switch of earlier points, no prune, no deletes).
EXPECTED = {
    "validation pass (whole)",
    "change-detection scans (both passes)",
    "chunking and planning (both passes)",
    "token counts (both passes)",
    "validation: new documents (chunk, measure)",
    "BM25 term counts (validation)",
    "writing pass (whole)",
    "writing: plan slice (whole)",
    "writing: new documents' points built live",
    "writing: new documents written live and verified",
    "writing: switch and verify (whole)",
    "BM25 analysis",
    "BM25 encoding",
    "embedding (hashing)",
    "index: upsert",
    "index: retrieve (read-back, verify)",
    "index: seal check and seals",
    "key digests",
    "run end: prune, BM25 statistics",
}


def test_the_step_timers_time_every_step_of_a_first_ingestion() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "ingest_scale.py"), "--child", "200", "--steps"],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    first, again = figures["first"], figures["again"]
    assert first["chunks"] == first["embedded"] > 0
    steps = first["steps"]
    assert steps.keys() >= EXPECTED, sorted(EXPECTED - steps.keys())
    assert all(steps[name]["calls"] > 0 for name in EXPECTED)
    # Every document is new: written live in one upsert a slice, never staged or flipped.
    written = steps["writing: new documents written live and verified"]
    assert steps["index: upsert"]["seconds"] <= written["seconds"]
    assert steps["index: upsert"]["calls"] == written["calls"]
    assert "writing: stage (whole)" not in steps and "index: set_payload" not in steps
    # The unchanged re-run embeds nothing and writes nothing.
    assert again["embedded"] == 0
    assert "index: upsert" not in again["steps"]
    # Each pass reports its own peak, split into anonymous and file-backed pages (the
    # re-run's extra at 300,000 documents is the index's mapped files: docs/ingestion.md).
    for phase in (first, again):
        assert phase["peak_rss_mib"] > 0
        assert 0 < phase["peak_anon_rss_mib"] <= phase["peak_rss_mib"]
        assert phase["peak_file_rss_mib"] > 0
    # The time spent producing the documents is reported apart, inside each pass's time.
    for phase in (first, again):
        assert 0 < phase["source_seconds"] <= phase["seconds"]
    assert figures["again_over_first_without_sources"] > 0
    # The baseline re-run, prefetch off, in the same child: the same unchanged corpus.
    baseline = figures["again_without_prefetch"]
    assert baseline["embedded"] == 0 and baseline["chunks"] == again["chunks"]
    assert figures["again_over_again_without_prefetch"] > 0

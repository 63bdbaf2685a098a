"""Queued ingestion with real processes on loopback (issue 13, "Several ingestion
workers"): a coordinator (``ragwright ingest --queue``) and three ``ragwright
ingest-worker`` processes, one of them killed (SIGKILL) while it holds items it has
half written, sharing a scratch PostgreSQL database (the queue) and one Qdrant
collection. The index is the REST double (``tests/adapters/qdrant_server.py``:
qdrant-client's own local engine behind Qdrant's REST endpoints, served by this test
process): no Qdrant server binary runs here. The embedder is the bundled ONNX model.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.adapters.qdrant_server import serve_qdrant_double
from tests.conftest import SAMPLES
from tests.replicas import scratch_database
from tests.workers import (
    HANG,
    Process,
    claims,
    max_dense_difference,
    processes,
    ragwright_json,
    ragwright_run,
    results,
    server_env,
    snapshot,
    wait_for_items,
)

pytestmark = pytest.mark.slow

LEASE = 2.0
# The counts a run's documents decide, whoever processed them.
EXACT = (
    "documents",
    "chunks",
    "unchanged",
    "verified",
    "documents_changed",
    "documents_pruned",
    "bm25_avgdl",
    "sparse_reencoded",
    "tenants",
    "shared_ids",
)


def test_three_workers_with_one_killed_mid_item_build_the_single_process_index(
    tmp_path: Path,
) -> None:
    with (
        scratch_database() as database,
        serve_qdrant_double(record=False) as (qdrant_url, double),
        processes() as started,
    ):
        # The reference: one process into a fresh collection on the same server.
        reference = ragwright_json(
            "ingest",
            str(SAMPLES),
            env=server_env(tmp_path / "reference", qdrant_url, "reference", database),
        )
        env = {
            **server_env(tmp_path / "queued", qdrant_url, "queued", database),
            "RAGWRIGHT_INGEST_LEASE": str(LEASE),
        }
        coordinator = Process(
            "coordinator",
            ("ingest", str(SAMPLES), "--queue", "--item-size", "1", "--json"),
            env,
            tmp_path / "coordinator.log",
        ).start()
        started.append(coordinator)
        wait_for_items(database, timeout=60)

        # Worker "doomed" stops for good after switching the first document of each
        # item it takes (and keeps its heartbeat), so it is killed holding written,
        # unrecorded items.
        doomed = Process(
            "doomed",
            ("ingest-worker", "--name", "doomed"),
            env,
            tmp_path / "doomed.log",
            failpoint=HANG,
        ).start()
        started.append(doomed)
        doomed.wait_for_log(f"failpoint {HANG}: holding the item", timeout=60)
        survivors = [
            Process(
                name,
                ("ingest-worker", "--name", name, "--until-idle", "3"),
                env,
                tmp_path / f"{name}.log",
            ).start()
            for name in ("left", "right")
        ]
        started.extend(survivors)
        doomed.kill()

        status, out = coordinator.finish(timeout=300)
        assert status == 0, coordinator.log()
        for survivor in survivors:
            assert survivor.finish(timeout=60)[0] == 0, survivor.log()
        queued = json.loads(out)
        attempts = claims(database)
        recorded = results(database)

        # Each item has one result, recorded by a live worker; the doomed worker's items
        # were taken again by another worker after its heartbeat stopped.
        assert sorted(item for item, _, _ in recorded) == list(range(10))
        assert {outcome for _, outcome, _ in recorded} == {"done"}
        held = {item for item, worker in attempts if worker == "doomed"}
        assert held, attempts
        assert all(worker in ("left", "right") for _, _, worker in recorded)
        by_item = Counter(item for item, _ in attempts)
        assert all(by_item[item] == 2 for item in held), attempts

        # The summary counts each document once, as the single process did.
        assert {k: queued[k] for k in EXACT} == {k: reference[k] for k in EXACT}
        # Points the doomed worker had embedded were reused, not embedded again.
        assert 0 < queued["embedded"] <= reference["embedded"]

        # The same points, payloads and vectors as the single process's index.
        ours, theirs = snapshot(double, "queued"), snapshot(double, "reference")
        assert ours.keys() == theirs.keys()
        assert {k: p.payload_sha256 for k, p in ours.items()} == {
            k: p.payload_sha256 for k, p in theirs.items()
        }
        assert {k: p.sparse for k, p in ours.items()} == {k: p.sparse for k, p in theirs.items()}
        assert max_dense_difference(ours, theirs) < 1e-5

        # Nothing changed since: the next queued run finds every chunk unchanged and
        # queues nothing (no worker is running).
        again = ragwright_json("ingest", str(SAMPLES), "--queue", env=env)
        assert again["embedded"] == 0
        assert again["documents_changed"] == 0
        assert again["unchanged"] == again["chunks"] == reference["chunks"]


def revise(corpus: Path) -> None:
    """A second revision of the sample corpus, in place (a document's source path is part
    of its metadata): one document edited (a paragraph rewritten), one published
    (metadata only), one removed and one added."""
    edited = corpus / "api-rate-limits.md"
    text = edited.read_text()
    assert "one hundred requests per minute" in text
    edited.write_text(text.replace("one hundred requests per minute", "two hundred a minute"))
    draft = corpus / "worker-shutdown-draft.md"
    draft.write_text(draft.read_text().replace("state: draft", "state: published"))
    (corpus / "refund-policy.md").unlink()
    (corpus / "status-page.md").write_text(
        "---\ndocument_id: status-page\ndocument_type: runbook\npublication_state: published\n"
        "---\n# Update the status page\n\n## During an incident\n\nPost an update every "
        "thirty minutes while the incident is open, even when nothing changed.\n"
    )


def test_a_queued_rerun_with_edits_removals_and_prune_equals_a_single_process_rerun(
    tmp_path: Path,
) -> None:
    """Change detection, obsolete cleanup and prune on a collection that already holds
    the corpus: the second queued run's summary and index equal a single process's."""
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES, corpus)
    with scratch_database() as database, serve_qdrant_double(record=False) as (qdrant_url, double):
        reference_env = server_env(tmp_path / "reference", qdrant_url, "reference", database)
        queued_env = server_env(tmp_path / "queued", qdrant_url, "queued", database)
        queued_args = ("--queue", "--item-size", "2", "--local-workers", "2")
        ragwright_json("ingest", str(corpus), env=reference_env)
        initial = ragwright_json("ingest", str(corpus), *queued_args, env=queued_env, timeout=300)
        revise(corpus)
        reference = ragwright_json("ingest", str(corpus), "--prune", env=reference_env)
        queued = ragwright_json(
            "ingest", str(corpus), "--prune", *queued_args, env=queued_env, timeout=300
        )
        ours, theirs = snapshot(double, "queued"), snapshot(double, "reference")

    assert initial["documents_changed"] == 10
    # Only the added and the edited documents are embedded (the edited one's unchanged
    # windows are kept), the published draft is a payload update, the removed one pruned.
    assert (queued["documents_changed"], queued["documents_pruned"]) == (3, 1)
    assert 0 < queued["embedded"] < queued["chunks"] and queued["deleted"] > 0
    assert queued["payload_updated"] > 0
    # With no worker killed, every count is the single process's, not only the exact ones.
    assert queued == reference
    assert ours.keys() == theirs.keys()
    assert {k: p.payload_sha256 for k, p in ours.items()} == {
        k: p.payload_sha256 for k, p in theirs.items()
    }
    assert {k: p.sparse for k, p in ours.items()} == {k: p.sparse for k, p in theirs.items()}
    assert max_dense_difference(ours, theirs) < 1e-5


def test_an_ingest_worker_loop_gives_back_the_signal_handlers_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop takes Ctrl-C and SIGTERM to stop after its item; run inside a longer
    # process (a test worker running commands in-process), it must not leave them taken:
    # a later Ctrl-C would only set a stale event and be lost.
    import signal

    from ragwright.cli.workers import run_ingest_worker

    monkeypatch.setenv("RAGWRIGHT_HOME", str(tmp_path / "h"))
    for key in [k for k in os.environ if k.startswith("RAGWRIGHT_") and k != "RAGWRIGHT_HOME"]:
        monkeypatch.delenv(key)
    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(Exception, match="RAGWRIGHT_BACKEND"):
        run_ingest_worker("w", until_idle=0.1)  # refused: the embedded index has no queue
    assert {n: signal.getsignal(n) for n in before} == before


def test_queued_ingestion_refuses_the_embedded_index_and_options_without_queue(
    tmp_path: Path,
) -> None:
    from tests.cli import ragwright

    embedded = ragwright("ingest", str(SAMPLES), "--queue", home=tmp_path / "h")
    assert embedded.returncode == 1
    assert "RAGWRIGHT_BACKEND" in embedded.stderr and "Qdrant server" in embedded.stderr
    assert len(embedded.stderr.strip().splitlines()) == 1
    worker = ragwright("ingest-worker", home=tmp_path / "h")
    assert worker.returncode == 1 and "RAGWRIGHT_BACKEND" in worker.stderr
    no_queue = ragwright(
        "ingest",
        str(SAMPLES),
        "--local-workers",
        "2",
        home=tmp_path / "h",
        RAGWRIGHT_BACKEND="qdrant",
        RAGWRIGHT_QDRANT_LOCATION="http://127.0.0.1:9",
    )
    assert no_queue.returncode == 2 and "--queue" in no_queue.stderr
    no_database = ragwright(
        "ingest",
        str(SAMPLES),
        "--queue",
        home=tmp_path / "h",
        RAGWRIGHT_BACKEND="qdrant",
        RAGWRIGHT_QDRANT_LOCATION="http://127.0.0.1:9",
    )
    assert no_database.returncode == 1 and "RAGWRIGHT_DATABASE_URL" in no_database.stderr
    assert not (tmp_path / "h" / "index").exists()


def test_local_workers_started_by_the_coordinator_run_its_items(tmp_path: Path) -> None:
    with scratch_database() as database, serve_qdrant_double(record=False) as (qdrant_url, _):
        env = server_env(tmp_path / "home", qdrant_url, "local", database)
        summary = ragwright_json(
            "ingest",
            str(SAMPLES),
            "--queue",
            "--item-size",
            "4",
            "--local-workers",
            "2",
            env=env,
            timeout=300,
        )
        assert (summary["documents"], summary["documents_changed"]) == (10, 10)
        assert summary["verified"] == summary["chunks"] > 0
        recorded = results(database)
        assert [item for item, _, _ in recorded] == [0, 1, 2]
        assert {worker.rsplit("-", 1)[-1] for _, _, worker in recorded} <= {"local0", "local1"}


def test_a_queued_runs_deadline_bounds_its_items_retries_on_the_workers(tmp_path: Path) -> None:
    """The coordinator's RAGWRIGHT_INGEST_DEADLINE travels with the items: a worker that
    has no deadline of its own stops retrying a provider that keeps failing transiently
    when the run's deadline leaves no room, and the run fails naming it."""
    from tests.scripted_openai import scripted_embeddings

    # The deadline leaves a loaded machine's start-up (two processes, the validation
    # pass) time for some attempts; the attempts allowed are far more than fit in it.
    deadline, attempts = 20, 100
    failing = [(503, {"Retry-After": "0.5"})] * 400
    with (
        scratch_database() as database,
        serve_qdrant_double(record=False) as (qdrant_url, _),
        scripted_embeddings(failures=failing) as embeddings,
        processes() as started,
    ):
        env = {
            **server_env(tmp_path / "home", qdrant_url, "bounded", database),
            **embeddings.env(
                RAGWRIGHT_EMBEDDING_IN_FLIGHT="1",
                RAGWRIGHT_REMOTE_CALL_ATTEMPTS=str(attempts),
                RAGWRIGHT_REMOTE_CALL_BUDGET="600",
            ),
        }
        worker = Process(
            "worker", ("ingest-worker", "--name", "w", "--until-idle", "5"), env, tmp_path / "w.log"
        ).start()
        started.append(worker)
        coordinator = Process(
            "coordinator",
            ("ingest", str(SAMPLES), "--queue", "--item-size", "100", "--json"),
            {**env, "RAGWRIGHT_INGEST_DEADLINE": str(deadline)},
            tmp_path / "coordinator.log",
        ).start()
        started.append(coordinator)
        status, _ = coordinator.finish(timeout=300)
        assert worker.finish(timeout=60)[0] == 0, worker.log()
        recorded = results(database)
    assert status == 1, coordinator.log()
    assert "work item 0 failed on worker w" in coordinator.log(), coordinator.log()
    assert "deadline_exhausted" in coordinator.log(), coordinator.log()
    assert [(item, outcome) for item, outcome, _ in recorded] == [(0, "failed")]
    # Retried every 0.5 s until the run's 20 s ran out: far fewer than 100 attempts.
    assert 1 <= len(embeddings.requests) <= 2 * deadline + 5 < attempts


def test_a_queued_run_with_no_worker_stops_after_its_deadline_and_its_items_are_dropped(
    tmp_path: Path,
) -> None:
    """No worker takes the items: the coordinator does not wait forever. Past its
    RAGWRIGHT_INGEST_DEADLINE (and the grace for workers' own deadline failures) it
    exits 1 naming the items without a result, and the run is closed as failed, so a
    worker started later drops its items instead of writing them."""
    import psycopg

    with scratch_database() as database, serve_qdrant_double(record=False) as (qdrant_url, _):
        env = server_env(tmp_path / "home", qdrant_url, "expired", database)
        coordinator = ragwright_run(
            "ingest",
            str(SAMPLES),
            "--queue",
            "--item-size",
            "4",
            env={**env, "RAGWRIGHT_INGEST_DEADLINE": "2"},
            timeout=60,
        )
        assert coordinator.returncode == 1, coordinator.stderr
        assert "3 of 3 work items had no result" in coordinator.stderr, coordinator.stderr
        assert "RAGWRIGHT_INGEST_DEADLINE" in coordinator.stderr
        with psycopg.connect(database) as db:
            states = db.execute("SELECT state FROM ragwright.ingest_runs").fetchall()
        assert states == [("failed",)]
        late = ragwright_run("ingest-worker", "--name", "late", "--until-idle", "1", env=env)
        assert late.returncode == 0, late.stderr
        assert results(database) == []

"""``PgQueuerIngestQueue`` against the machine's PostgreSQL (a scratch database per
test): a killed worker's item is taken again after the lease, an item run twice at once
is recorded once, items of an ended or abandoned run are dropped unrun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from ragwright.adapters.ingest_queue import PgQueuerIngestQueue
from ragwright.application.ingest_queue import WorkerStats, WorkItem, wait_for_results
from ragwright.errors import IndexUnavailable
from tests.processes import read_line
from tests.replicas import scratch_database

LEASE = 1.0

DEAD_WORKER = """
import sys, time
from ragwright.adapters.ingest_queue import PgQueuerIngestQueue

def hold(item):
    print("holding", item.number, flush=True)
    while True:
        time.sleep(3600)

PgQueuerIngestQueue(sys.argv[1], lease=float(sys.argv[2])).work(hold, worker="dead")
"""


@contextmanager
def renewed(queue: PgQueuerIngestQueue, run_id: str) -> Iterator[None]:
    """The coordinator's part while workers run: renew the run (else it is abandoned)."""
    done = threading.Event()

    def renew() -> None:
        while not done.wait(0.2):
            queue.renew_run(run_id)

    thread = threading.Thread(target=renew, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def work(
    queue: PgQueuerIngestQueue,
    handle: Callable[[WorkItem], Mapping[str, Any]],
    idle_exit: float,
    worker: str = "w",
) -> WorkerStats:
    """``queue.work`` until idle, stopped after 30 s at most (a bug must fail, not hang)."""
    stop = threading.Event()
    timer = threading.Timer(30.0, stop.set)
    timer.start()
    try:
        return queue.work(handle, worker=worker, idle_exit=idle_exit, stop=stop)
    finally:
        timer.cancel()


def claims(database: str) -> list[tuple[int, str, float]]:
    with psycopg.connect(database) as db:
        rows = db.execute(
            "SELECT item, worker, extract(epoch FROM claimed_at) "
            "FROM ragwright.ingest_item_claims ORDER BY claimed_at"
        ).fetchall()
    return [(int(i), str(w), float(t)) for i, w, t in rows]


def test_an_item_whose_worker_was_killed_is_taken_again_after_the_lease() -> None:
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        try:
            queue.open_run("run")
            queue.enqueue("run", 0, {"n": 0})
            queue.seal_run("run", 1)
            dead = subprocess.Popen(
                [sys.executable, "-c", DEAD_WORKER, database, str(LEASE)],
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ,
            )
            try:
                assert dead.stdout is not None
                assert read_line(dead) == "holding 0"
                time.sleep(2 * LEASE)  # still held: its heartbeat goes on
                assert [(i, w) for i, w, _ in claims(database)] == [(0, "dead")]
                dead.send_signal(signal.SIGKILL)
                dead.wait(30)
            finally:
                if dead.poll() is None:
                    dead.kill()
                    dead.wait(30)
                if dead.stdout is not None:
                    dead.stdout.close()
            seen: list[int] = []

            def handle(item: WorkItem) -> Mapping[str, Any]:
                seen.append(item.number)
                return {"chunks": 1}

            with renewed(queue, "run"):
                stats = work(queue, handle, idle_exit=1.0, worker="alive")
            assert seen == [0]
            assert (stats.done, stats.failed, stats.skipped) == (1, 0, 0)
            (first, second) = claims(database)
            assert (first[:2], second[:2]) == ((0, "dead"), (0, "alive"))
            # Held for 2 leases while heartbeating, then taken only once it went stale.
            assert second[2] - first[2] >= 3 * LEASE
            assert [(r.number, r.worker, r.report) for r in queue.results("run")] == [
                (0, "alive", {"chunks": 1})
            ]
            assert queue.results("run", known={0}) == []
        finally:
            queue.close()


def test_an_item_run_twice_at_once_is_recorded_once() -> None:
    # Two deliveries of item 0 (a worker presumed dead that was only slow) run together
    # and both finish: the first recorded result stands.
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        try:
            queue.open_run("run")
            queue.enqueue("run", 0, {})
            queue.enqueue("run", 0, {})
            queue.seal_run("run", 1)
            both = threading.Barrier(2, timeout=30)
            order: list[int] = []
            lock = threading.Lock()

            def handle(item: WorkItem) -> Mapping[str, Any]:
                both.wait(timeout=30)  # both deliveries are running now
                with lock:
                    order.append(len(order))
                    return {"delivery": order[-1]}

            with renewed(queue, "run"):
                stats = work(queue, handle, idle_exit=1.0)
            assert stats.done == 2
            recorded = queue.results("run")
            assert len(recorded) == 1
            assert recorded[0].report in ({"delivery": 0}, {"delivery": 1})
        finally:
            queue.close()


@pytest.mark.parametrize("ending", ["finished", "abandoned-by-silence"])
def test_items_of_a_run_that_ended_are_dropped_without_running(ending: str) -> None:
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        try:
            queue.open_run("run")
            queue.enqueue("run", 0, {})
            queue.seal_run("run", 1)
            if ending == "finished":
                queue.close_run("run", "failed")
            else:  # its coordinator stopped renewing it (died) long ago
                with psycopg.connect(database) as db:
                    db.execute(
                        "UPDATE ragwright.ingest_runs "
                        "SET renewed_at = renewed_at - interval '1 hour'"
                    )
            ran: list[int] = []
            stats = work(queue, lambda item: ran.append(item.number) or {}, idle_exit=0.5)
            assert ran == []
            assert (stats.done, stats.skipped) == (0, 1)
            assert queue.results("run") == []
        finally:
            queue.close()


def test_a_failing_item_is_recorded_as_failed_with_its_error() -> None:
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        try:
            queue.open_run("run")
            queue.enqueue("run", 0, {})
            queue.seal_run("run", 1)

            def handle(item: WorkItem) -> Mapping[str, Any]:
                raise ValueError("no such model")

            with renewed(queue, "run"):
                stats = work(queue, handle, idle_exit=0.5)
            assert stats.failed == 1
            (result,) = queue.results("run")
            assert (result.report, result.error) == (None, "ValueError: no such model")
        finally:
            queue.close()


def test_a_transient_failure_puts_the_item_back_and_it_runs_again() -> None:
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        try:
            queue.open_run("run")
            queue.enqueue("run", 0, {})
            queue.seal_run("run", 1)
            calls: list[int] = []

            def handle(item: WorkItem) -> Mapping[str, Any]:
                calls.append(item.number)
                if len(calls) == 1:
                    raise IndexUnavailable("http://qdrant:6333", "connection refused")
                return {"chunks": 2}

            with renewed(queue, "run"):
                stats = work(queue, handle, idle_exit=1.0)
            assert calls == [0, 0]
            assert (stats.done, stats.failed, stats.retried) == (1, 0, 1)
            (result,) = queue.results("run")
            assert (result.report, result.error) == ({"chunks": 2}, None)
        finally:
            queue.close()


def test_a_result_committed_after_a_later_ones_is_still_seen_by_the_coordinator() -> None:
    # Two workers record items 0 and 1 at once: item 0's insert takes the lower
    # sequence number but commits last. A coordinator polling "after the highest
    # sequence seen" missed it forever (seen in the suite: "1 of 10 outstanding").
    with scratch_database() as database:
        queue = PgQueuerIngestQueue(database, lease=LEASE)
        slow = psycopg.connect(database)
        try:
            queue.open_run("run")
            queue.seal_run("run", 2)
            record = (
                "INSERT INTO ragwright.ingest_item_results "
                "(run_id, item, outcome, report, worker) VALUES ('run', %s, 'done', '{}', %s)"
            )
            slow.execute(record, (0, "slow"))  # seq 1, not committed yet
            with psycopg.connect(database, autocommit=True) as fast:
                fast.execute(record, (1, "fast"))  # seq 2, committed

            now = [1_000.0]
            seen: list[tuple[int, str]] = []

            def sleep(seconds: float) -> None:
                if seen and not slow.closed:
                    slow.commit()  # after the coordinator saw item 1
                now[0] += seconds

            wait_for_results(
                queue,
                "run",
                2,
                poll=1.0,
                on_result=lambda r: seen.append((r.number, r.worker)),
                deadline_at=now[0] + 5,  # a missed result ends the wait, never hangs it
                clock=lambda: now[0],
                sleep=sleep,
            )
            assert seen == [(1, "fast"), (0, "slow")]
            sequences = {r.number: r.sequence for r in queue.results("run")}
            assert sequences[0] < sequences[1]  # recorded out of commit order indeed
            assert queue.results("run", known={0, 1}) == []
        finally:
            slow.close()
            queue.close()

"""Ingestion cost per chunk against corpus size, and where its time goes (issue 25).

Ingests the synthetic corpus of ``benchmarks/ingest_memory.py`` (hashing embedder, so
embedding costs almost nothing) into a fresh embedded index, with a timer around each
step of the write path: the validation pass (change-detection scans, key digests,
chunking), the writing pass's planning (scan, chunking, planning), BM25 analysis and
encoding, staging upserts, read-back, the switch (payload writes, deletes), verify,
segment seals, the free-space checks, and the run's end (prune, BM25 statistics, the
manifest). Steps run on two threads (planning on the caller's, every write on the
writer's), so their seconds add up to more than the wall time. Then the same corpus
is ingested again (unchanged: nothing to embed) and timed, twice: as the product runs
(``again``) and with the payload read-ahead turned off (``again_without_prefetch``:
the baseline, in the same child; docs/ingestion.md, "Re-running over an unchanged
corpus: reading the payloads ahead").

Each size runs in a fresh child process; its peak RSS is the kernel's ``ru_maxrss`` for
it, and each pass (first, again) also reports its own peak (the high-water mark restarted
before it) split into anonymous and file-backed pages. The child fixes glibc's malloc
thresholds as the ``ingest`` command does (``--glibc-default-heap`` leaves them). Wall
seconds depend on the machine's load (recorded: ``/proc/loadavg`` before and after each
size); CPU seconds (every thread of the child, user and system, plus its forked
children's) much less, so both are reported. Like ``ragwright ingest``, a large run
reads its sources and plans its slices in forked children (the source reader and the
planning process; ``planner_peak_rss_mib`` is the larger of their peaks), so
``source_seconds`` (the sources read in the measured process) is then near 0;
``--in-process-planning`` keeps all of it in the measured process, the baseline.
``--steps`` adds the per-step timers (which cost a little) and plans in process, so
every step is timed where it runs.
The code measured is whatever ``ragwright`` the interpreter imports, so the same
script measures another checkout with ``PYTHONPATH=<checkout>/src``. Prints JSON and
writes ``benchmarks/results/ingest_scale.json`` (or ``--out``).

    python benchmarks/ingest_scale.py [--sizes 10000 30000 100000 300000] [--steps]
        [--label after] [--glibc-default-heap] [--in-process-planning] [--out FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "ingest_scale.json"
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest_memory import (  # noqa: E402
    BATCH_SIZE,
    SyntheticCorpus,
    _QuietHashingEmbedder,
    _Sampler,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 30_000, 100_000, 300_000])
    parser.add_argument("--steps", action="store_true", help="time each step")
    parser.add_argument("--label", default="", help="recorded with the results")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--glibc-default-heap",
        action="store_true",
        help="leave glibc's malloc thresholds adjusting (the ingest command fixes them)",
    )
    parser.add_argument(
        "--in-process-planning",
        action="store_true",
        help="read the sources and plan every slice in the ingesting process (the command "
        "forks a source reader and a planning process for a large run)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = run_child(
            args.child,
            steps=args.steps,
            fix_heap=not args.glibc_default_heap,
            # Step timers count this process's time only: planning stays here to be seen.
            planning_process=not (args.in_process_planning or args.steps),
        )
        print(json.dumps(figures))
        return
    import ragwright

    runs = []
    for size in args.sizes:
        runs.append(
            run_in_child(
                size,
                steps=args.steps,
                default_heap=args.glibc_default_heap,
                in_process_planning=args.in_process_planning,
            )
        )
        print(json.dumps(runs[-1]), flush=True)
    first, last = runs[0], runs[-1]
    result = {
        "label": args.label,
        "heap": "glibc default" if args.glibc_default_heap else "thresholds fixed (as ingest)",
        "planning": (
            "in process"
            if args.in_process_planning or args.steps
            else "planning process (as ingest)"
        ),
        "code": str(Path(ragwright.__file__).parents[1]),
        "cpus": os.cpu_count(),
        "runs": runs,
        "cpu_per_chunk_largest_over_smallest": round(
            last["first"]["cpu_us_per_chunk"] / first["first"]["cpu_us_per_chunk"], 3
        ),
        "wall_per_chunk_largest_over_smallest": round(
            last["first"]["us_per_chunk"] / first["first"]["us_per_chunk"], 3
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run_in_child(
    size: int, *, steps: bool, default_heap: bool, in_process_planning: bool = False
) -> dict[str, Any]:
    """One size in a fresh interpreter; its peak RSS from the kernel."""
    load_before = _load()
    command = [sys.executable, __file__, "--child", str(size)]
    command += (["--steps"] if steps else []) + (["--glibc-default-heap"] if default_heap else [])
    command += ["--in-process-planning"] if in_process_planning else []
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{size}: child exited with {os.waitstatus_to_exitcode(status)}")
    figures = json.loads(output)
    # Restarting a pass's high-water mark restarts the kernel's maximum too, so the
    # child's peak is the largest of its own and its passes'.
    passes = [figures[label].get("peak_rss_mib") or 0.0 for label in ("first", "again")]
    return {
        "load_average_before": load_before,
        "load_average_after": _load(),
        "peak_rss_mib": max(round(usage.ru_maxrss / 1024, 1), *passes),  # Linux: KiB
        **figures,
    }


class Timers:
    """Seconds and calls per step name, summed over threads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Time ``owner.attribute``, and every ragwright module's binding of the same function.

        A module that imported the function by name (``from x import f``) calls its own
        binding, so wrapping only the defining module would miss those calls; a step that
        moves to another module stays timed.
        """
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                cpu = time.thread_time() - cpu
                with self._lock:
                    self.seconds[name] += spent
                    self.cpu[name] += cpu
                    self.calls[name] += 1

        setattr(owner, attribute, timed)
        if isinstance(owner, type):
            return
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("ragwright."):
                for bound, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, bound, timed)

    def table(self, chunks: int) -> dict[str, Any]:
        return {
            name: {
                "seconds": round(seconds, 2),
                "cpu_seconds": round(self.cpu[name], 2),
                "calls": self.calls[name],
                "cpu_us_per_chunk": round(self.cpu[name] / max(1, chunks) * 1e6, 1),
            }
            for name, seconds in sorted(self.seconds.items(), key=lambda kv: -self.cpu[kv[0]])
        }


def instrument(timers: Timers) -> None:
    from ragwright.adapters.edge import files
    from ragwright.adapters.edge.index import EdgeIndex
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.core import keysets, lexical
    from ragwright.pipeline import finishing, planning, staging, switching, validation, writing

    for owner, attribute, name in (
        (validation, "prepare_run", "validation pass (whole)"),
        (validation, "document_source_digest", "validation: source digests"),
        (validation, "proven_unchanged", "validation: unchanged proven by counts"),
        (finishing, "finish_run", "run end: prune, BM25 statistics"),
        (finishing, "_refresh_lexical_stats", "run end: BM25 statistics recount"),
        (planning, "scan_documents", "change-detection scans (both passes)"),
        (planning, "chunk_and_plan", "chunking and planning (both passes)"),
        (planning, "check_input_lengths", "token counts (both passes)"),
        (planning, "check_new_document", "validation: new documents (chunk, measure)"),
        (planning, "plan_slice", "writing: plan slice (whole)"),
        (staging, "stage_points", "writing: stage (whole)"),
        (staging, "prepare_live", "writing: new documents' points built live"),
        (staging, "write_new_live", "writing: new documents written live and verified"),
        (lexical, "document_vector", "BM25 encoding"),
        (switching, "switch_slice", "writing: switch and verify (whole)"),
        (switching, "_refresh_kept", "writing: refresh kept points"),
        (switching, "_verify", "writing: verify after switch"),
        (writing, "write_slices", "writing pass (whole)"),
        (Bm25Encoder, "terms", "BM25 analysis"),
        (Bm25Encoder, "count_terms", "BM25 term counts (validation)"),
        (EdgeIndex, "upsert", "index: upsert"),
        (EdgeIndex, "retrieve", "index: retrieve (read-back, verify)"),
        (EdgeIndex, "scroll", "index: scroll"),
        (EdgeIndex, "count", "index: count"),
        (EdgeIndex, "set_payload", "index: set_payload"),
        (EdgeIndex, "update_sparse", "index: update_sparse"),
        (EdgeIndex, "delete", "index: delete"),
        (EdgeIndex, "delete_payload_keys", "index: delete_payload_keys"),
        (EdgeIndex, "_compact", "index: seal check and seals"),
        (EdgeIndex, "_commit_manifest", "index: manifest commit"),
        (EdgeIndex, "facet", "index: facet"),
        (files, "require_free_space", "index: free-space checks"),
        (keysets, "key_digest", "key digests"),
        (keysets.KeySet, "_merge", "key set merges"),
    ):
        timers.wrap(owner, attribute, name)


def _cpu() -> float:
    """CPU seconds of this process, every thread (user and system), and of its children
    once they ended (the source reader and the planning process, each joined at the end
    of its pass)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _children_peak_rss_mib() -> float:
    """The largest peak RSS of this process's ended children (source readers and planning
    processes)."""
    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)


class _TimedSource:
    """The corpus, re-iterable, with the seconds spent producing its documents (the
    generator and ``validate_document``: what reading and parsing files is to a real run)."""

    def __init__(self, documents: Any) -> None:
        self._documents = documents
        self.seconds = 0.0

    def __len__(self) -> int:
        return len(self._documents)

    def __iter__(self) -> Iterator[Any]:
        documents = iter(self._documents)
        while True:
            started = time.perf_counter()
            try:
                document = next(documents)
            except StopIteration:
                return
            finally:
                self.seconds += time.perf_counter() - started
            yield document


def _reset_peak_rss() -> bool:
    """Start this process's peak RSS (VmHWM) again from its current RSS (Linux 4.0+)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text("ascii").splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run_child(
    size: int, *, steps: bool, fix_heap: bool, planning_process: bool = True
) -> dict[str, Any]:
    if fix_heap:  # what `ragwright ingest` does (cli/common.py, LONG_RUNNING)
        from ragwright.heap import fix_malloc_thresholds

        fix_malloc_thresholds()
    from ragwright.adapters.edge.index import EdgeIndex
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.core.contracts import contract_for
    from ragwright.core.lexical import LexicalProfile
    from ragwright.types import ChunkingPolicy

    timers = Timers()
    if steps:
        instrument(timers)
    from ragwright.pipeline.ingest import ingest

    lexical, policy, embedder = LexicalProfile(), ChunkingPolicy(), _QuietHashingEmbedder()
    if steps:
        timers.wrap(embedder, "embed_documents", "embedding (hashing)")
    contract = contract_for(embedder.profile, policy.version, lexical)
    documents = _TimedSource(SyntheticCorpus(size))
    with tempfile.TemporaryDirectory(prefix="ragwright-profile-") as workdir:
        figures: dict[str, Any] = {"documents": size}
        for label in ("first", "again", "again_without_prefetch"):
            # Each pass's own peak: the kernel's high-water mark restarts here, and a
            # sampler splits the largest RSS seen into anonymous and file-backed pages.
            phase_peak = _reset_peak_rss()
            documents.seconds = 0.0
            sampler = _Sampler()
            started, cpu = time.perf_counter(), _cpu()
            with EdgeIndex(Path(workdir) / "index", contract) as index:
                opened = time.perf_counter() - started
                if label == "again_without_prefetch":
                    index.prefetch_payloads = lambda: 0  # type: ignore[method-assign]
                report = ingest(
                    documents,
                    policy=policy,
                    embedder=embedder,
                    sparse_encoder=Bm25Encoder(lexical),
                    index=index,
                    batch_size=BATCH_SIZE,
                    planning_process=planning_process,
                )
            seconds, cpu = time.perf_counter() - started, _cpu() - cpu
            figures[label] = {
                "cpu_seconds": round(cpu, 1),
                "cpu_us_per_chunk": round(cpu / report.chunks * 1e6, 1),
                "seconds": round(seconds, 1),
                "open_seconds": round(opened, 2),
                "chunks": report.chunks,
                "embedded": report.embedded,
                "chunks_per_s": round(report.chunks / seconds, 1),
                "us_per_chunk": round(seconds / report.chunks * 1e6, 1),
                # Producing the source documents (every pass over them), inside `seconds`.
                "source_seconds": round(documents.seconds, 3),
                "peak_rss_mib": _peak_rss_mib() if phase_peak else None,
                # The forked children's, separately (their pages are partly the parent's,
                # shared since the fork): the largest of any child so far.
                "planner_peak_rss_mib": _children_peak_rss_mib() if planning_process else None,
                **sampler.stop(),
            }
            if steps:
                figures[label]["steps"] = timers.table(report.chunks)
            for table in (timers.seconds, timers.cpu, timers.calls):
                table.clear()
        figures["again_over_first"] = round(
            figures["again"]["seconds"] / figures["first"]["seconds"], 3
        )
        figures["again_without_prefetch_over_first"] = round(
            figures["again_without_prefetch"]["seconds"] / figures["first"]["seconds"], 3
        )
        figures["again_over_again_without_prefetch"] = round(
            figures["again"]["seconds"] / figures["again_without_prefetch"]["seconds"], 3
        )
        # The same ratio without the time spent producing the documents, which the
        # synthetic generator makes larger than reading files would (docs/ingestion.md).
        figures["again_over_first_without_sources"] = round(
            (figures["again"]["seconds"] - figures["again"]["source_seconds"])
            / (figures["first"]["seconds"] - figures["first"]["source_seconds"]),
            3,
        )
    return figures


if __name__ == "__main__":
    main()

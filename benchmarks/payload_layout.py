"""What a point's payload layout costs the embedded index's write path (issue 25).

The points are the product's own: the synthetic corpus of ``benchmarks/ingest_memory.py``
planned by the writing pass's code (``plan_documents``: chunks, stored ids, payloads,
BM25 vectors) and built live as ``staging.prepare_live`` builds them, with the hashing
embedder's vectors. They are written through ``EdgeIndex.upsert`` (the free-space
check, the write session, the seal check and the seals with their reopen) in slices of
``--slice`` points, and three parts of its time are reported a point, CPU and wall:

- ``binding_and_copies``: every upsert's time outside the two below: the engine's
  Python binding turning the points into its own values (``qe.Point``; most of it: the
  ``none`` layout's figure is what is left without a payload), the upsert's copies of
  vectors and payloads, its free-space check;
- ``update``: the engine's ``update`` (WAL record, segment, payload indexes);
- ``seal``: the seal checks and seals (``optimize``, the shard's reopen, handing freed
  memory back). Spread over every point written: with ``SEAL_POINTS`` 16,384, 50,000
  points make two seals and leave about a third unsealed, so a long run's seal cost a
  point is about half as much again.

The same points are written in four layouts of the same payload:

- ``as_written``: the payload the product writes today;
- ``packed``: the fields queries filter on or the live read-back compares
  (``staging.LIVE_READBACK_FIELDS``, the keyword-indexed fields, the integer-indexed
  BM25 term count, ``content_hash``) top-level, every other field in one JSON string;
  the child checks the two carry the same information;
- ``filter_fields``: only the indexed fields (what queries filter on);
- ``none``: no payload (the engine's floor for the vectors alone).

Also what one value of each type costs to convert (the binding tries bool, unsigned,
signed, float, string, list, object in turn, and each failed try raises), and how far
a Python thread gets while ``update`` and ``optimize`` run (both hold the GIL).
Each layout runs in a fresh child, ``--rounds`` times, the layouts alternating; each
part's median and the median of the runs' totals are reported, with each layout's total
over ``as_written``'s. CPU seconds are the child's (every thread); wall seconds show
whether the engine spreads its work over threads. The load average is recorded. The
packed layout's JSON string is built before the timing starts (planning would build it).

Prints JSON and writes ``benchmarks/results/payload_layout.json`` (or ``--out``).

    python benchmarks/payload_layout.py [--points 50000] [--rounds 3] [--slice 360]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "payload_layout.json"
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest_memory import SyntheticCorpus, _QuietHashingEmbedder  # noqa: E402

LAYOUTS = ("as_written", "packed", "filter_fields", "none")
PARTS = ("binding_and_copies", "update", "seal")
CLOCKS = {"us": time.process_time, "wall_us": time.perf_counter}
# The corpus mean the BM25 vectors are encoded under (any fixed value: only their size
# matters here).
AVGDL = 45.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=50_000, help="points a layout writes")
    parser.add_argument("--rounds", type=int, default=3, help="children a layout runs in")
    parser.add_argument("--slice", type=int, default=360, help="points an upsert writes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON results")
    parser.add_argument("--child", choices=LAYOUTS, help=argparse.SUPPRESS)
    # The points an appendable segment is sealed at (the product's unless set: the test
    # sets it low so that a few points seal).
    parser.add_argument("--seal-points", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(write_once(args.child, args.points, args.slice, args.seal_points)))
        return
    load_before = os.getloadavg()
    samples: dict[str, list[dict[str, Any]]] = {layout: [] for layout in LAYOUTS}
    for _ in range(args.rounds):
        for layout in LAYOUTS:
            command = [sys.executable, __file__, "--points", str(args.points)]
            if args.seal_points:
                command += ["--seal-points", str(args.seal_points)]
            done = subprocess.run(
                [*command, "--slice", str(args.slice), "--child", layout],
                check=True,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            samples[layout].append(json.loads(done.stdout))
    rows = {layout: _median_row(runs) for layout, runs in samples.items()}
    for clock in CLOCKS:
        written = rows["as_written"][f"total_{clock}"]
        for row in rows.values():
            row[f"total_{clock}_over_as_written"] = round(row[f"total_{clock}"] / written, 3)
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "points": args.points,
        "slice": args.slice,
        "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "layouts": rows,
        "convert_us_per_value": convert_costs(points=min(2000, args.points)),
        "other_thread_while_engine_runs": gil_share(min(20_000, max(4000, args.points))),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    timed = [f"{part}_{clock}" for clock in CLOCKS for part in PARTS]
    row: dict[str, Any] = {k: v for k, v in runs[0].items() if k not in timed}
    for name in timed:
        row[name] = round(statistics.median(run[name] for run in runs), 1)
    for clock in CLOCKS:
        totals = [sum(run[f"{part}_{clock}"] for part in PARTS) for run in runs]
        row[f"total_{clock}"] = round(statistics.median(totals), 1)
    row["samples"] = [{name: run[name] for name in timed} for run in runs]
    return row


def product_points(count: int) -> list[Any]:
    """``count`` points as the writing pass builds them for new documents."""
    from ragwright.adapters.lexical import Bm25Encoder
    from ragwright.core.lexical import LexicalProfile
    from ragwright.pipeline.planning import plan_documents
    from ragwright.pipeline.staging import prepare_live
    from ragwright.types import ChunkingPolicy

    embedder, encoder = _QuietHashingEmbedder(), Bm25Encoder(LexicalProfile())
    points: list[Any] = []
    documents = iter(SyntheticCorpus(count))  # about 2.8 chunks a document: enough
    while len(points) < count:
        batch = list(itertools.islice(documents, 128))
        for planned in plan_documents(batch, ChunkingPolicy(), embedder, encoder, AVGDL):
            plan = planned.plan.points
            encoded = {p.stored_id: e for p, e in zip(plan, planned.encoded, strict=True)}
            vectors = embedder.embed_documents([p.embedding_input for p in plan])
            prepare_live(encoder, plan, vectors, AVGDL, encoded, points)
    return points[:count]


def filter_fields() -> tuple[str, ...]:
    from ragwright.core.points import INTEGER_INDEX_FIELDS, KEYWORD_INDEX_FIELDS

    return (*KEYWORD_INDEX_FIELDS, *INTEGER_INDEX_FIELDS)


def top_level_when_packed() -> tuple[str, ...]:
    from ragwright.pipeline.staging import LIVE_READBACK_FIELDS

    return (*filter_fields(), *LIVE_READBACK_FIELDS, "content_hash")


def laid_out(layout: str, payload: dict[str, Any]) -> dict[str, Any]:
    if layout == "as_written":
        return payload
    if layout == "none":
        return {}
    if layout == "filter_fields":
        indexed = filter_fields()
        return {k: v for k, v in payload.items() if k in indexed}
    kept = top_level_when_packed()
    packed = {k: v for k, v in payload.items() if k in kept}
    rest = {k: v for k, v in payload.items() if k not in kept}
    packed["chunk"] = json.dumps(rest, ensure_ascii=False, separators=(",", ":"))
    return packed


def unpacked(payload: dict[str, Any]) -> dict[str, Any]:
    rest = json.loads(payload["chunk"])
    return {**{k: v for k, v in payload.items() if k != "chunk"}, **rest}


class _Spent:
    """Seconds spent in each part, on each clock of :data:`CLOCKS`."""

    def __init__(self) -> None:
        self.seconds = {(part, clock): 0.0 for part in ("upsert", *PARTS) for clock in CLOCKS}

    def timed(self, part: str, call: Any, *args: Any) -> Any:
        started = {clock: read() for clock, read in CLOCKS.items()}
        try:
            return call(*args)
        finally:
            for clock, read in CLOCKS.items():
                self.seconds[part, clock] += read() - started[clock]

    def per_point(self, count: int) -> dict[str, float]:
        def us(part: str, clock: str) -> float:
            return self.seconds[part, clock] / count * 1e6

        figures = {}
        for clock in CLOCKS:
            rest = us("upsert", clock) - us("update", clock) - us("seal", clock)
            figures[f"binding_and_copies_{clock}"] = round(rest, 1)
            figures[f"update_{clock}"] = round(us("update", clock), 1)
            figures[f"seal_{clock}"] = round(us("seal", clock), 1)
        return figures


class _TimedShard:
    """The engine's shard with its ``update`` timed."""

    def __init__(self, shard: Any, spent: _Spent) -> None:
        self._shard, self._spent = shard, spent

    def update(self, operation: Any) -> Any:
        return self._spent.timed("update", self._shard.update, operation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)


def write_once(
    layout: str, count: int, slice_points: int, seal_points: int | None
) -> dict[str, Any]:
    from ragwright.adapters.edge import engine
    from ragwright.adapters.edge.index import EdgeIndex
    from ragwright.core.contracts import contract_for
    from ragwright.core.lexical import LexicalProfile
    from ragwright.types import ChunkingPolicy, IndexPoint

    built = product_points(count)
    points = [
        IndexPoint(p.point_id, p.vector, laid_out(layout, dict(p.payload)), p.sparse) for p in built
    ]
    if layout == "packed" and any(  # the comparison must be of the same information
        unpacked(dict(p.payload)) != dict(q.payload) for p, q in zip(points, built, strict=True)
    ):
        raise SystemExit("the packed payload does not unpack to the written one")
    del built
    if seal_points:
        engine.SEAL_POINTS = seal_points
    embedder = _QuietHashingEmbedder()
    contract = contract_for(embedder.profile, ChunkingPolicy().version, LexicalProfile())
    spent = _Spent()
    with (
        tempfile.TemporaryDirectory(prefix="ragwright-layout-") as workdir,
        EdgeIndex(Path(workdir) / "index", contract) as index,
    ):
        compact = index._compact

        def timed_compact(written: int) -> None:
            try:
                spent.timed("seal", compact, written)
            finally:
                if not isinstance(index._shard, _TimedShard):  # reopened by a seal
                    index._shard = _TimedShard(index._shard, spent)

        index._compact = timed_compact  # type: ignore[method-assign]
        index._shard = _TimedShard(index._shard, spent)
        for start in range(0, len(points), slice_points):
            spent.timed("upsert", index.upsert, points[start : start + slice_points])
        seals = index.seals
        stored = index.count()
    if stored != count:
        raise SystemExit(f"{stored} points stored of {count}")
    if seals == 0 and count >= 2 * engine.SEAL_POINTS:  # the seal was not where it is timed
        raise SystemExit(f"{count} points written, no seal timed")
    sample = dict(points[0].payload)
    return {
        "payload_fields": len(sample),
        "string_values": sum(isinstance(v, str) for v in sample.values()),
        "payload_json_bytes": len(json.dumps(sample, ensure_ascii=False).encode()),
        "seals": seals,
        **spent.per_point(count),
    }


def convert_costs(values: int = 10, points: int = 2000) -> dict[str, float]:
    """µs the binding takes to convert one payload value of each type (``values``
    values of one type a point, less the empty payload's cost)."""
    import qdrant_edge as qe

    samples: dict[str, Any] = {
        "bool": True,
        "int": 7,
        "float": 0.5,
        "str": "published",
        "list of 3 ints": [0, 1, 2],
        "object": {"section_index": 1},
    }
    vector = {"dense": [0.1] * 64}

    def per_point(payload: dict[str, Any]) -> float:
        ids = [uuid.uuid4() for _ in range(points)]
        run = timeit.Timer(lambda: [qe.Point(i, vector, payload) for i in ids])
        return min(run.repeat(repeat=3, number=1)) / points * 1e6

    empty = per_point({})
    return {
        name: round((per_point({f"k{n}": value for n in range(values)}) - empty) / values, 2)
        for name, value in samples.items()
    }


def gil_share(points: int = 20_000) -> dict[str, float]:
    """How fast a Python thread counts while the engine upserts ``points`` points in one
    call and then seals them, over how fast it counts alone."""
    import qdrant_edge as qe

    from ragwright.adapters.edge import engine
    from ragwright.core.contracts import contract_for
    from ragwright.testing import HASHING_PROFILE

    counted = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            counted[0] += 1

    def rate(work: Any) -> float:
        before, started = counted[0], time.perf_counter()
        work()
        return (counted[0] - before) / (time.perf_counter() - started)

    engine.SEAL_POINTS = points // 4  # the optimize() below seals them
    contract = contract_for(HASHING_PROFILE, "payload-layout-v1")
    batch = [
        qe.Point(uuid.uuid4(), {contract.vector_name: [0.1] * 64}, {"text": "x" * 400})
        for _ in range(points)
    ]
    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    try:
        alone = rate(lambda: time.sleep(0.5))
        with tempfile.TemporaryDirectory(prefix="ragwright-gil-") as workdir:
            shard = qe.EdgeShard.create(workdir, engine.edge_config(contract))
            during_update = rate(lambda: shard.update(qe.UpdateOperation.upsert_points(batch)))
            during_seal = rate(shard.optimize)
            shard.close()
    finally:
        stop.set()
        counter.join()
    return {
        "during_update": round(during_update / alone, 3),
        "during_seal": round(during_seal / alone, 3),
    }


if __name__ == "__main__":
    main()

"""What a person waits for: ``ragwright ask`` from the command line, cold and warm.

Each ``ask`` is its own process, as a user runs it (``python -m ragwright ask QUESTION
--json``), over the sample corpus ingested into a temporary ``RAGWRIGHT_HOME``, with the
embedded local model and the default (quoted) answer style:

1. **in-command model** (``RAGWRIGHT_CHAT_KEEP_WARM=0`` and
   ``RAGWRIGHT_COMMAND_KEEP_WARM=0``, what every ``ask`` paid before the background
   processes): two asks, each loading the model into the command;
2. **background model and warm command process** (the defaults): the first ask starts
   the background model process and a warm command process (``ragwright.warm``); then
   every sample question (``samples/eval/cases.jsonl``, ``--rounds`` times) is asked
   twice, the order alternating between questions, both times by a new ``python -m
   ragwright`` process reusing the model: once handed to the warm command process
   (``warm_asks``), once run in its own process with ``RAGWRIGHT_COMMAND_KEEP_WARM=0``
   (``own_process_asks``, what an ask cost before the warm command process).

For every warm ask: the process's wall time and the answer's own stage timings (the
``timings`` of ``ask --json``: retrieve, assemble, score, generate, validate, support)
and the model server's split of the generate stage (the result's ``usage``: prompt tokens
read and spared by its cache, tokens written, milliseconds of each), p50/p95 over the
questions; the gap between the wall time and the stages' sum is the
process's start (interpreter, imports, opening the index and the embedder). The load
average is recorded at the start and the end (timings on a busy machine are not
comparable). The asks pass ``--type runbook --type note`` (the sample questions ask about
notes too). Reads only the project's ``samples/``; loads the local model (about 470 MiB),
and takes about 4 minutes on a quiet 2-core machine. "Process start" is everything
outside the answer's stages: interpreter start, imports, opening the index and the
embedder, and the process's exit. Writes ``benchmarks/results/ask_latency.json``.

    .venv/bin/python benchmarks/ask_latency.py [--rounds 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ragwright.adapters.chatmodels.local import assemble_model

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "samples" / "corpus"
CASES = ROOT / "samples" / "eval" / "cases.jsonl"
ELIGIBLE = ("--type", "runbook", "--type", "note")  # the sample questions ask notes too


def _ragwright(
    home: Path, *args: str, **env: str
) -> tuple[float, subprocess.CompletedProcess[str]]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAGWRIGHT_")},
        "RAGWRIGHT_HOME": str(home),
        **env,
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragwright", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ragwright {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return wall, done


def _ask(home: Path, question: str, **env: str) -> dict[str, Any]:
    wall, done = _ragwright(home, "ask", question, *ELIGIBLE, "--json", **env)
    result = json.loads(done.stdout)
    timings = result.get("timings") or {}
    usage = result.get("usage") or {}
    return {
        "wall_s": round(wall, 3),
        "status": result.get("status"),
        "stages_ms": {k: round(v, 1) for k, v in timings.items()},
        "stages_sum_s": round(sum(timings.values()) / 1000, 3),
        # The model server's own account of the generate stage (llama.cpp's timings):
        # tokens read (and how many its slot's cache spared), tokens written, and the
        # milliseconds of each; absent when the answer made no model call.
        "model": {key: usage.get(key) for key in _MODEL_FIGURES} if usage else None,
    }


_MODEL_FIGURES = (
    "input_tokens",
    "cached_input_tokens",
    "input_ms",
    "output_tokens",
    "output_ms",
)


def _wait_for_warm_process(home: Path) -> None:
    """Until the warm command process the first ask started has imported and built what
    it keeps (a command handed to it earlier would wait for that)."""
    give_up = time.monotonic() + 120
    while time.monotonic() < give_up:
        _, done = _ragwright(home, "model", "status", "--json")
        process = json.loads(done.stdout)["command_process"]
        if process and process["ready"]:
            return
        time.sleep(0.2)
    raise SystemExit("the warm command process did not come up in 120 s")


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="Times each question is asked.")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/ask_latency.json")
    args = parser.parse_args()
    questions = [
        json.loads(line)["question"] for line in CASES.read_text("utf-8").splitlines() if line
    ]
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ragwright-ask-") as scratch:
        home = Path(scratch) / "home"
        _ragwright(home, "ingest", str(CORPUS))
        # The model's file is assembled once (as a user's first command does), so
        # neither figure below pays it.
        assemble_model(home / "models")
        cold = [
            _ask(home, questions[0], RAGWRIGHT_CHAT_KEEP_WARM="0", RAGWRIGHT_COMMAND_KEEP_WARM="0")
            for _ in range(2)
        ]
        print(f"in-command model: {[c['wall_s'] for c in cold]} s", flush=True)
        try:
            first = _ask(home, questions[0])
            print(f"background model, first ask (starts it): {first['wall_s']} s", flush=True)
            _wait_for_warm_process(home)
            warm, alone = [], []
            for _ in range(args.rounds):
                for number, question in enumerate(questions):
                    # Each question twice, in the warm command process and in a process
                    # of its own, the order alternating: the second ask of a question
                    # finds its whole prompt in the model's cache.
                    if number % 2 == 0:
                        warm.append(_ask(home, question))
                        alone.append(_ask(home, question, RAGWRIGHT_COMMAND_KEEP_WARM="0"))
                    else:
                        alone.append(_ask(home, question, RAGWRIGHT_COMMAND_KEEP_WARM="0"))
                        warm.append(_ask(home, question))
                    print(
                        f"  warm ask {len(warm)}: {warm[-1]['wall_s']} s in the warm process, "
                        f"{alone[-1]['wall_s']} s in its own",
                        flush=True,
                    )
        finally:  # the background processes must not outlive the temporary home
            _ragwright(home, "model", "stop")
    stages = sorted({stage for ask in warm for stage in ask["stages_ms"]})
    summary = {
        "in_command_model_wall_s": [c["wall_s"] for c in cold],
        "background_first_ask_wall_s": first["wall_s"],
        "warm_ask_wall_s": _percentiles([a["wall_s"] for a in warm]),
        "warm_ask_stages_sum_s": _percentiles([a["stages_sum_s"] for a in warm]),
        "warm_ask_process_start_s": _percentiles([a["wall_s"] - a["stages_sum_s"] for a in warm]),
        "warm_ask_stage_ms": {
            stage: _percentiles([a["stages_ms"].get(stage, 0.0) for a in warm]) for stage in stages
        },
        "own_process_ask_wall_s": _percentiles([a["wall_s"] for a in alone]),
        "own_process_ask_process_start_s": _percentiles(
            [a["wall_s"] - a["stages_sum_s"] for a in alone]
        ),
        "own_process_ask_stages_sum_s": _percentiles([a["stages_sum_s"] for a in alone]),
        "warm_ask_model": {
            figure: _percentiles(
                [a["model"][figure] for a in warm if a["model"] and a["model"][figure] is not None]
            )
            for figure in _MODEL_FIGURES
            if any(a["model"] and a["model"][figure] is not None for a in warm)
        },
        "statuses": {s: sum(a["status"] == s for a in warm) for s in {a["status"] for a in warm}},
        "asks": len(warm),
    }
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "command": "python benchmarks/ask_latency.py " + " ".join(sys.argv[1:]),
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "summary": summary,
        "in_command_model": cold,
        "background_first_ask": first,
        "warm_asks": warm,
        "own_process_asks": alone,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

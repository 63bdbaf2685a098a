"""Many answers in one ``ragwright serve`` process: does its memory stay flat?

``ragwright serve`` runs as a real separate process over ClapNQ's passages (the shared
data's Markdown copies, type ``note``; the sample corpus when the data is absent),
answering ClapNQ's questions one after another (cycled when more answers are asked than
there are questions), with the bundled ONNX embedder and:

1. ``--answers N`` (default 1,000) from a scripted OpenAI-compatible provider on
   loopback (``tests/scripted_openai.py``, ``generated`` style): the service's own
   memory with the model's cost taken out;
2. ``--local N`` (default 0; 100 for the issue's figure) from the embedded local model
   (``quoted`` style, the default for it), the model server counted apart (it is a
   child process).

The server's RSS (and its children's) is sampled after every answer. The figure of
merit is the growth from the RSS after the first 100 answers to the RSS after the last
(target: within 5 %); the first 100 are the warm-up (caches fill, the allocator settles).
Each answer's status and latency are kept for the summary. The load average is recorded
at the start and the end (timings on a busy machine are not comparable; RSS is).
Writes ``benchmarks/results/soak.json``.

3. ``--eval N`` (default 0): one ``ragwright eval run CASES --answers`` process over N
   ClapNQ questions with the embedded local model, its RSS and the background model
   process's sampled every half second against the answers it has saved (the warm-up is
   the first N/5 answers, at most ``--warmup``). ``--eval-style evidence`` answers
   without the model (the embedding and retrieval side alone, in about a minute).
   Besides the growth it reports ``spread_every_25``: the largest sample at every 25th
   answer after the warm-up over the smallest, minus one (how far the level swings).

    python benchmarks/soak.py [--answers 1000] [--local 0] [--eval 0 [--eval-style STYLE]]
        [--warmup 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from tests.scripted_openai import scripted_openai  # noqa: E402

from service_load import free_port, quote_s1, ragwright, wait_ready  # noqa: E402

CLAPNQ = ROOT.parent / "shared" / "data" / "clapnq"
SAMPLES = ROOT / "samples"
MIB = 1024 * 1024


# ClapNQ passages are single paragraphs of up to a few hundred words; they are chunked as
# benchmarks/answers.py chunks them (the service reads the same settings).
CLAPNQ_CHUNKING = {
    "RAGWRIGHT_CHUNKING": "sentence-blocks",
    "RAGWRIGHT_MAX_WORDS": "400",
    "RAGWRIGHT_MAX_TOKENS": "256",
}


def corpus_and_questions() -> tuple[Path, str, list[str]]:
    """The folder to ingest, its document type, and the questions to ask."""
    if (CLAPNQ / "markdown").is_dir():
        questions = [
            json.loads(line)["question"]
            for line in (CLAPNQ / "questions.jsonl").read_text().splitlines()
            if line.strip()
        ]
        return CLAPNQ / "markdown", "note", questions
    print("shared ClapNQ data not found: soaking on the sample corpus", file=sys.stderr)
    cases = (SAMPLES / "eval" / "cases.jsonl").read_text().splitlines()
    return SAMPLES / "corpus", "runbook", [json.loads(c)["question"] for c in cases if c]


def rss(process: psutil.Process) -> tuple[int, int]:
    """The process's RSS and its children's, in bytes."""
    own = process.memory_info().rss
    children = 0
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            children += child.memory_info().rss
    return own, children


def soak(env: dict[str, str], answers: int, warmup: int, tmp: Path, name: str) -> dict[str, Any]:
    folder, kind, questions = corpus_and_questions()
    home = tmp / name
    env = {**env, "RAGWRIGHT_HOME": str(home)}
    if kind == "note":
        env.update(CLAPNQ_CHUNKING)
    ragwright("ingest", str(folder), env=env)
    added = ragwright(
        "keys", "add", "--no-tenant", "--scope", "answer", "--type", kind, "--json", env=env
    )
    key = json.loads(added)["key"]
    port = free_port()
    log = tmp / f"{name}.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "ragwright", "serve", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    samples: list[dict[str, Any]] = []
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    load_start = os.getloadavg()
    try:
        wait_ready(url, server, log)
        process = psutil.Process(server.pid)
        own, children = rss(process)
        samples.append({"answers": 0, "rss_mib": own / MIB, "children_rss_mib": children / MIB})
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600
        ) as client:
            for n in range(1, answers + 1):
                question = questions[(n - 1) % len(questions)]
                started = time.perf_counter()
                response = client.post("/v1/answers", json={"question": question})
                latencies.append((time.perf_counter() - started) * 1000)
                body = response.json()
                statuses[body.get("mode") or f"http {response.status_code}"] += 1
                own, children = rss(process)
                samples.append(
                    {"answers": n, "rss_mib": own / MIB, "children_rss_mib": children / MIB}
                )
                if n % 100 == 0 or n == answers:
                    print(f"{name}: {n}/{answers} answers, RSS {own / MIB:.0f} MiB", flush=True)
    finally:
        server.terminate()
        server.wait(30)
    after_warmup = samples[min(warmup, len(samples) - 1)]
    last = samples[-1]
    growth = (last["rss_mib"] - after_warmup["rss_mib"]) / after_warmup["rss_mib"]
    return {
        "answers": answers,
        "questions_distinct": min(answers, len(questions)),
        "corpus": str(folder.relative_to(folder.parents[2]))
        if CLAPNQ in folder.parents
        else "samples",
        "statuses": dict(statuses),
        "latency_ms": {
            "p50": round(statistics.median(latencies), 1),
            "p95": round(statistics.quantiles(latencies, n=20)[-1], 1)
            if len(latencies) > 1
            else None,
        },
        "rss_mib": {
            "start": round(samples[0]["rss_mib"], 1),
            f"after_{warmup}": round(after_warmup["rss_mib"], 1),
            "max": round(max(s["rss_mib"] for s in samples), 1),
            "last": round(last["rss_mib"], 1),
        },
        "children_rss_mib_last": round(last["children_rss_mib"], 1),
        "growth_after_warmup": round(growth, 4),
        "within_5_percent": abs(growth) <= 0.05,
        "rss_every_100": [round(s["rss_mib"], 1) for s in samples if s["answers"] % 100 == 0],
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }


def resident_rss(models: Path) -> int:
    """RSS in bytes of the background model process recorded in ``models`` (0 if none)."""
    with contextlib.suppress(OSError, ValueError, KeyError, psutil.NoSuchProcess):
        pid = json.loads((models / "resident.json").read_text())["pid"]
        return int(psutil.Process(pid).memory_info().rss)
    return 0


def eval_soak(
    env: dict[str, str], cases: int, warmup: int, tmp: Path, style: str | None = None
) -> dict[str, Any]:
    """``ragwright eval run CASES --answers`` over ``cases`` ClapNQ questions (both splits,
    in file order) as a real separate process, with the embedded local model: its RSS, its
    children's and the background model process's (detached, so no child) sampled every
    half second, against the answers it has saved so far (the run writes each answer to
    its ``answers.jsonl`` as it completes)."""
    from answers import clapnq_rows

    home = tmp / "eval"
    env = {**env, "RAGWRIGHT_HOME": str(home), **CLAPNQ_CHUNKING}
    ragwright("ingest", str(CLAPNQ / "markdown"), env=env)
    rows = (clapnq_rows("tune") + clapnq_rows("test"))[:cases]
    dataset = tmp / "eval-cases.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    log = tmp / "eval.log"
    samples: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    started = time.perf_counter()
    with log.open("wb") as sink:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragwright",
                "eval",
                "run",
                str(dataset),
                "--answers",
                *(("--style", style) if style else ()),
                "--type",
                "note",
                "--json",
            ],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            process = psutil.Process(child.pid)
            while child.poll() is None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    own, children = rss(process)
                    model = resident_rss(home / "models")
                    saved = sum(
                        len(path.read_bytes().splitlines())
                        for path in (home / "evaluations").glob("*/answers.jsonl")
                    )
                    samples.append(
                        {
                            "answers": saved,
                            "rss_mib": own / MIB,
                            "children_rss_mib": children / MIB,
                            "model_rss_mib": model / MIB,
                        }
                    )
                time.sleep(0.5)
        finally:
            if child.poll() is None:
                child.terminate()
            child.wait(60)
    if child.returncode != 0:
        raise SystemExit(f"eval run failed ({child.returncode}):\n{log.read_text()[-2000:]}")

    def at(answers: int) -> dict[str, Any]:
        return next(s for s in samples if s["answers"] >= answers)

    total = max(s["answers"] for s in samples)
    # The last sample with every answer saved, before the run closes and exits.
    after_warmup, last = at(min(warmup, total)), at(total)
    growth = (last["rss_mib"] - after_warmup["rss_mib"]) / after_warmup["rss_mib"]
    steady = [at(n)["rss_mib"] for n in range(25, total + 1, 25) if n >= warmup]
    return {
        "cases": len(rows),
        "answers_seen": total,
        "wall_s": round(time.perf_counter() - started, 1),
        "rss_mib": {
            "first_sample": round(samples[0]["rss_mib"], 1),
            f"after_{warmup}": round(after_warmup["rss_mib"], 1),
            "max": round(max(s["rss_mib"] for s in samples), 1),
            "last": round(last["rss_mib"], 1),
        },
        "children_rss_mib": {
            f"after_{warmup}": round(after_warmup["children_rss_mib"], 1),
            "last": round(last["children_rss_mib"], 1),
        },
        # The background model process (detached, so not a child): the local model.
        "model_rss_mib": {
            f"after_{warmup}": round(after_warmup["model_rss_mib"], 1),
            "last": round(last["model_rss_mib"], 1),
        },
        "growth_after_warmup": round(growth, 4),
        "within_5_percent": abs(growth) <= 0.05,
        "rss_every_25": [round(at(n)["rss_mib"], 1) for n in range(25, total + 1, 25)],
        "spread_every_25": round(max(steady) / min(steady) - 1, 4) if steady else None,
        "style": style or "configured",
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=1000, help="scripted-provider answers")
    parser.add_argument("--local", type=int, default=0, help="embedded local-model answers")
    parser.add_argument("--warmup", type=int, default=100, help="answers before the baseline")
    parser.add_argument(
        "--eval",
        type=int,
        default=0,
        metavar="N",
        help="answers of one 'eval run --answers' over N ClapNQ questions (local model)",
    )
    parser.add_argument(
        "--eval-style",
        choices=("quoted", "generated", "evidence"),
        default=None,
        help="answer style of the --eval run (default: the configured one, quoted)",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "soak.json")
    args = parser.parse_args()
    record: dict[str, Any] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        if args.answers:
            with scripted_openai(quote_s1) as (base_url, _):
                env = {
                    **os.environ,
                    "RAGWRIGHT_CHAT_PROVIDER": "openai",
                    "RAGWRIGHT_CHAT_MODEL": "scripted",
                    "RAGWRIGHT_CHAT_BASE_URL": base_url,
                    "RAGWRIGHT_CHAT_API_KEY": "sk-scripted",
                    "RAGWRIGHT_ANSWER_STYLE": "generated",
                }
                record["scripted"] = soak(env, args.answers, args.warmup, Path(tmp), "scripted")
        if args.local:
            env = {**os.environ, "RAGWRIGHT_CHAT_PROVIDER": "local"}
            warm = min(args.warmup, max(1, args.local // 5))
            record["local"] = soak(env, args.local, warm, Path(tmp), "local")
        if args.eval:
            env = {**os.environ, "RAGWRIGHT_CHAT_PROVIDER": "local"}
            warm = min(args.warmup, max(1, args.eval // 5))
            record["eval_run"] = eval_soak(env, args.eval, warm, Path(tmp), args.eval_style)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "cpus"}, indent=2))


if __name__ == "__main__":
    main()

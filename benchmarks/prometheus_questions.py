"""A team's documentation folder as a newcomer uses it (issue 47 items 4 and 6): the
prometheus-docs folder ingested with no flags, then every question of
``benchmarks/data/prometheus_questions.jsonl`` asked with no flags.

The folder (``../shared/data/documents/prometheus-docs``: 71 Markdown files of another
tool's front matter) goes into a fresh RAGWRIGHT_HOME with ``ragwright ingest DIR`` (a
child process, the user's command; ``--ingest-flags`` adds flags, for the record of a
run made while the bare command failed). The questions were written before any answer
was seen: 20 the files answer (each with the file that answers it, and any other file
that also does) and 10 on-topic ones they do not. Each is asked as ``ragwright ask
QUESTION --json`` in its own command (``--styles``: ``default``, no flag: the embedded
model's quoted answers; ``evidence``: ``--style evidence``, no model, the gate and the
evidence alone). Nothing is calibrated: the embedding profile's default answerability
threshold applies, and each result records which threshold and source did.

Reported per style: answerable questions answered citing a file that answers it (and the
one named first), answered citing another file, declined; unanswerable questions
declined (any status but ``answered`` or ``evidence_only``) and answered. The results keep
ids, statuses, cited paths and scores, never document text, questions or answers.
Writes ``benchmarks/results/prometheus_questions.json`` with the load average at the
start and end; the background model and warm command process it started are stopped.

    python benchmarks/prometheus_questions.py [--styles default,evidence]
        [--home DIR (reuse: nothing is ingested)] [--ingest-flags "..."] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT.parent / "shared" / "data" / "documents" / "prometheus-docs"
QUESTIONS = ROOT / "benchmarks" / "data" / "prometheus_questions.jsonl"
RAGWRIGHT = [sys.executable, "-m", "ragwright"]
ANSWERED = ("answered", "evidence_only")
TIMEOUT = 900


def run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAGWRIGHT_")}
    environment["RAGWRIGHT_HOME"] = str(home)
    return subprocess.run(
        [*RAGWRIGHT, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=home.parent,
        timeout=TIMEOUT,
        check=False,
    )


def cited_paths(outcome: dict[str, Any]) -> list[str]:
    """The paths (below the ingested folder) of the sources an outcome cites, or for an
    evidence-only result, of the sources its selected sentences come from."""
    if outcome.get("citations"):
        return sorted({c.get("location") or "" for c in outcome["citations"]})
    labels = {q["id"].split(".")[0] for q in outcome.get("quotes") or []}
    return sorted(
        {s.get("location") or "" for s in outcome.get("sources") or [] if s["label"] in labels}
    )


def ask_all(home: Path, questions: list[dict[str, Any]], style: str) -> list[dict[str, Any]]:
    rows = []
    for question in questions:
        flags = [] if style == "default" else ["--style", style]
        started = time.perf_counter()
        result = run(["ask", question["question"], *flags, "--json"], home)
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            rows.append({"id": question["id"], "status": f"error rc {result.returncode}"})
            print(f"  {style} {question['id']}: rc {result.returncode}", flush=True)
            continue
        outcome = json.loads(result.stdout)
        paths = cited_paths(outcome)
        signal = outcome.get("answerability") or {}
        files = question.get("files", [])
        row = {
            "id": question["id"],
            "answerable": question["answerable"],
            "status": outcome["status"],
            "mode": outcome["mode"],
            "cited": paths,
            "cites_an_answering_file": bool(set(paths) & set(files)),
            "cites_the_first_file": bool(files) and files[0] in paths,
            "answerability_score": signal.get("score"),
            "answerability_threshold": outcome["options"]["answerability_threshold"],
            "answerability_source": outcome["options"]["answerability_source"],
            "seconds": round(seconds, 2),
        }
        rows.append(row)
        print(
            f"  {style:<8} {question['id']} {row['status']:<20} "
            f"{'right file' if row['cites_an_answering_file'] else '-':<10} "
            f"{row['answerability_score'] or 0:.3f} {seconds:.1f} s",
            flush=True,
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r.get("answerable")]
    unanswerable = [r for r in rows if r.get("answerable") is False]
    answered = [r for r in answerable if r["status"] in ANSWERED]
    return {
        "answerable": len(answerable),
        "answered_citing_an_answering_file": sum(
            1 for r in answered if r["cites_an_answering_file"]
        ),
        "answered_citing_the_first_file": sum(1 for r in answered if r["cites_the_first_file"]),
        "answered_citing_another_file": sum(
            1 for r in answered if not r["cites_an_answering_file"]
        ),
        "answerable_declined": len(answerable) - len(answered),
        "unanswerable": len(unanswerable),
        "unanswerable_declined": sum(1 for r in unanswerable if r["status"] not in ANSWERED),
        "statuses": {
            s: sum(1 for r in rows if r["status"] == s) for s in {r["status"] for r in rows}
        },
        "errors": sum(1 for r in rows if "answerable" not in r),
        "seconds_p50": sorted(r["seconds"] for r in rows if "seconds" in r)[len(rows) // 2]
        if rows
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", default="default,evidence")
    parser.add_argument("--home", type=Path)
    parser.add_argument("--ingest-flags", default="")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "prometheus_questions.json"
    )
    args = parser.parse_args()
    if not FOLDER.is_dir():
        sys.exit(f"prometheus-docs not found at {FOLDER} (see ../shared/data/README.md)")
    questions = [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines() if line]
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="ragwright-prometheus-") as tmp:
        home = args.home or Path(tmp) / "home"
        ingest: dict[str, Any] = {"reused_home": args.home is not None}
        if args.home is None:
            command = ["ingest", str(FOLDER), *shlex.split(args.ingest_flags)]
            started = time.perf_counter()
            result = run(command, home)
            ingest.update(
                command="ragwright " + " ".join([*command[:1], "DIR", *command[2:]]),
                returncode=result.returncode,
                seconds=round(time.perf_counter() - started, 1),
            )
            print(f"ingest: rc {result.returncode} in {ingest['seconds']} s", flush=True)
            if result.returncode != 0:
                print(result.stderr[-2000:], file=sys.stderr)
                sys.exit(1)
        status = json.loads(run(["status", "--json"], home).stdout)
        ingest["documents"] = len(status.get("documents", []))
        ingest["chunking_versions"] = [
            {"version": v["chunking_version"], "live_chunks": v["live_chunks"]}
            for v in status.get("versions", [])
        ]
        results: dict[str, Any] = {}
        try:
            for style in args.styles.split(","):
                rows = ask_all(home, questions, style)
                results[style] = {"summary": summary(rows), "questions": rows}
                print(f"{style}: {json.dumps(results[style]['summary'])}", flush=True)
        finally:
            run(["model", "stop"], home)
    out = {
        "config": {
            "folder": str(FOLDER),
            "questions": str(QUESTIONS.relative_to(ROOT)),
            "ingest": ingest,
            "styles": args.styles.split(","),
            "calibration": "none (the embedding profile's default applies)",
        },
        "results": results,
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

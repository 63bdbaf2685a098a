"""Hostile uploads against a real ``ragwright serve``: does the service stay up and give
its memory back?

Starts ``serve`` on a fresh home (embedded defaults, nothing ingested) for each probe,
makes one ``ingest``-scope key and sends: Word files whose ``document.xml`` inflates to
1 GB and to 100 MB of short paragraphs (files of 3.2 MB and 340 KB), a 1 GB one whose
header claims 1 KiB, the 1 GB one three times at once, one inflating to 60 MB of
paragraphs (under the inflated limit: what the conversion box's time and memory limits
stop), a 20,000-page PDF, and a 100 MB chunked body to the page's ``POST /ui/ask``
without a session. During each probe ``/healthz`` is timed every 50 ms and the server's
RSS sampled; the record has each probe's status and time, the worst ``/healthz``, and
the server's RSS before, at its peak and 2 s after.

    python benchmarks/hostile_uploads.py [--out benchmarks/results/hostile_uploads.json]
        [--src DIR]  # another checkout's src/ (the code before a change), same probes
        [--request-timeout 60]

A probe whose request passes ``--request-timeout`` is recorded as ``timeout`` (the old
code converts a 1 GB bomb for minutes); a server that dies is recorded as ``died``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.adapters.formats.pdf_maker import make_pdf  # noqa: E402
from tests.adapters.formats.test_box import docx_bomb  # noqa: E402

MIB = 1024 * 1024
FORM = {"document_type": "note", "publication_state": "published"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Server:
    """``ragwright serve`` in a child process on a fresh home."""

    def __init__(self, tmp: Path, src: Path | None) -> None:
        self.home = tmp / f"home-{time.monotonic_ns()}"
        self.env = {**os.environ, "RAGWRIGHT_HOME": str(self.home)}
        if src is not None:
            self.env["PYTHONPATH"] = str(src)
        self.key = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ragwright",
                    "keys",
                    "add",
                    "--no-tenant",
                    "--scope",
                    "ingest",
                    "--json",
                ],
                env=self.env,
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
        )["key"]
        self.port = free_port()
        self.log = (tmp / f"serve-{self.port}.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ragwright", "serve", "--port", str(self.port)],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("serve did not start")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(30)
        self.log.close()


def watch(server: Server, stop: threading.Event, out: dict[str, Any]) -> None:
    """Time /healthz every 50 ms and sample the server's RSS until ``stop``."""
    worst, failures, peak = 0.0, 0, 0.0
    with httpx.Client(timeout=5) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                client.get(f"{server.url}/healthz")
                worst = max(worst, (time.perf_counter() - started) * 1000)
            except httpx.HTTPError:
                failures += 1
            peak = max(peak, rss_mib(server.process.pid) or 0.0)
            stop.wait(0.05)
    out.update(
        healthz_worst_ms=round(worst, 1), healthz_failures=failures, rss_peak_mib=round(peak)
    )


def post(url: str, timeout: float, **request: Any) -> tuple[str, float]:
    """One POST: its status (``timeout``, or the error's name) and seconds."""
    started = time.perf_counter()
    try:
        outcome = str(httpx.post(url, timeout=timeout, **request).status_code)
    except httpx.TimeoutException:
        outcome = "timeout"
    except httpx.HTTPError as error:
        outcome = type(error).__name__
    return outcome, round(time.perf_counter() - started, 2)


def upload(server: Server, name: str, data: bytes, timeout: float) -> tuple[str, float]:
    return post(
        f"{server.url}/v1/ingestions/files",
        timeout,
        files=[("files", (name, data))],
        data=FORM,
        headers={"Authorization": f"Bearer {server.key}"},
    )


def chunked_ui_ask(server: Server, size: int, timeout: float) -> tuple[str, float]:
    def body() -> Any:
        piece = b"q=" + b"x" * MIB
        for _ in range(size // MIB):
            yield piece

    return post(
        f"{server.url}/ui/ask",
        timeout,
        content=body(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def probe(server: Server, name: str, send: Callable[[], list[tuple[str, float]]]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "probe": name,
        "rss_before_mib": round(rss_mib(server.process.pid) or 0),
    }
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(server, stop, record))
    watcher.start()
    try:
        results = send()
    finally:
        time.sleep(2)  # what the server holds once the probe is over
        stop.set()
        watcher.join()
    record["responses"] = [{"status": s, "seconds": t} for s, t in results]
    record["rss_after_mib"] = round(rss_mib(server.process.pid) or 0)
    record["server"] = "alive" if server.alive() else f"died ({server.process.returncode})"
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/hostile_uploads.json"
    )
    parser.add_argument("--src", type=Path, default=None)
    parser.add_argument("--request-timeout", type=float, default=60.0)
    args = parser.parse_args()
    limit = args.request_timeout
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        gb = docx_bomb(tmp / "gb.docx", 1024 * MIB, paragraphs=True).read_bytes()
        hundred = docx_bomb(tmp / "hundred.docx", 100 * MIB, paragraphs=True).read_bytes()
        liar = docx_bomb(tmp / "liar.docx", 1024 * MIB, declared=1024, paragraphs=True).read_bytes()
        under = docx_bomb(tmp / "under.docx", 60 * MIB, paragraphs=True).read_bytes()
        pages = make_pdf([[] for _ in range(20_000)])
        probes: list[tuple[str, Callable[[Server], list[tuple[str, float]]]]] = [
            ("docx inflating to 1 GB", lambda s: [upload(s, "gb.docx", gb, limit)]),
            ("docx inflating to 100 MB", lambda s: [upload(s, "h.docx", hundred, limit)]),
            ("docx 1 GB, header claims 1 KiB", lambda s: [upload(s, "l.docx", liar, limit)]),
            ("3 x docx 1 GB at once", lambda s: parallel(s, gb, limit)),
            (
                "docx of 60 MB of paragraphs (under the limit)",
                lambda s: [upload(s, "u.docx", under, limit)],
            ),
            ("pdf of 20,000 pages", lambda s: [upload(s, "p.pdf", pages, limit)]),
            ("100 MB chunked body to /ui/ask", lambda s: [chunked_ui_ask(s, 100 * MIB, limit)]),
        ]
        sizes = {
            "gb.docx": len(gb),
            "h.docx": len(hundred),
            "l.docx": len(liar),
            "p.pdf": len(pages),
        }
        records = []
        for name, send in probes:
            # A server of its own for each probe: what the old code still converts after
            # its client left must not weigh on the next probe.
            server = Server(tmp, args.src)
            try:
                records.append(probe(server, name, lambda s=server, f=send: f(s)))
            finally:
                server.stop()
            print(json.dumps(records[-1]), flush=True)
    result = {
        "code": str(args.src or ROOT / "src"),
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "file_bytes": sizes,
        "request_timeout_s": limit,
        "probes": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


def parallel(server: Server, data: bytes, timeout: float) -> list[tuple[str, float]]:
    results: list[tuple[str, float]] = [("", 0.0)] * 3

    def one(index: int) -> None:
        results[index] = upload(server, f"gb-{index}.docx", data, timeout)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


if __name__ == "__main__":
    main()

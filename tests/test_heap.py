"""Freed large blocks go back to the system (ragwright.heap), and every command does it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragwright.cli import common
from ragwright.heap import fix_malloc_thresholds

# Frees a mapped 8 MiB block (glibc then raises its mmap threshold to 8 MiB), allocates
# 40 blocks of 2 MiB, each followed by a 100 KiB block above it, and frees the large ones:
# prints the MiB still resident from them.
PATTERN = """
import ctypes, os, sys
if sys.argv[1] == "fixed":
    from ragwright.heap import fix_malloc_thresholds
    assert fix_malloc_thresholds()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def touched(size):
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    return block
libc.free(touched(8 * 2**20))
before = rss()
large, small = [], []
for _ in range(40):
    large.append(touched(2 * 2**20))
    small.append(touched(100 * 1024))
for block in large:
    libc.free(block)
print(round(rss() - before))
"""

glibc_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's tunables")


def _kept_mib(mode: str, **env: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PATTERN, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
        check=True,
    )
    return int(done.stdout)


@glibc_only
def test_with_fixed_thresholds_freed_large_blocks_leave_the_process() -> None:
    # Without: the 80 MiB freed stay resident (the dynamic threshold put them on the heap
    # under the smaller blocks); with: they were mappings, returned on free.
    assert _kept_mib("default") >= 60
    assert _kept_mib("fixed") <= 20


@glibc_only
def test_the_persons_own_malloc_tunables_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert fix_malloc_thresholds() is False


@pytest.mark.parametrize(
    ("argv", "fixed"),
    [
        (["serve", "--port", "8001"], True),
        (["eval", "run", "cases.jsonl", "--answers"], True),
        (["ingest", "docs/"], True),
        (["worker"], True),
        (["ingest-worker", "--name", "w"], True),
        (["ask", "How do I drain the queue?"], False),
        (["search", "drain"], False),
        (["--help"], False),
    ],
)
def test_long_running_commands_fix_them_before_they_run_and_one_shot_ones_do_not(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], fixed: bool
) -> None:
    # A one-shot ask exits before its memory matters and would pay ~0.25 s for it.
    events: list[str] = []
    monkeypatch.setattr(sys, "argv", ["ragwright", *argv])
    monkeypatch.setattr(common, "fix_malloc_thresholds", lambda: events.append("fixed") or True)
    monkeypatch.setattr(common, "app", lambda **_: events.append("command"))
    with pytest.raises(SystemExit) as ended:
        common.main()
    assert ended.value.code == 0
    assert events == (["fixed", "command"] if fixed else ["command"])

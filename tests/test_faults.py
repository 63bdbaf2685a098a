"""Infrastructure faults through the real command line: each ends in one line and exit 1,
or degrades with one warning (docs/operations.md has the table these tests hold to)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import ragwright
from tests.conftest import SAMPLES
from tests.processes import CHILD_TIMEOUT
from tests.test_cli import _quote_s1

QUESTION = "Should I drain all queued work during shutdown?"


def closed_port() -> int:
    """A loopback port nothing listens on (bound once by us, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def mount(*args: str) -> None:
    done = subprocess.run(
        ["mount", *args], capture_output=True, text=True, check=False, timeout=CHILD_TIMEOUT
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip()}): needs root in a VM or container")


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[Path]:
    """A read-only bind mount of a freshly ingested home (as an operator would ship it)."""
    home = tmp_path / "home"
    ragwright("ingest", str(SAMPLES), home=home, check=True)
    view = tmp_path / "view"
    view.mkdir()
    mount("--bind", str(home), str(view))
    try:
        mount("-o", "remount,bind,ro", str(view))
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True, timeout=CHILD_TIMEOUT)


@pytest.mark.slow
def test_read_only_commands_work_on_a_read_only_home(read_only_view: Path) -> None:
    status = ragwright("status", "--json", home=read_only_view, check=True)
    assert sum(d["live_chunks"] for d in json.loads(status.stdout)["documents"]) == 21
    hits = json.loads(
        ragwright("search", QUESTION, "--json", home=read_only_view, check=True).stdout
    )
    assert hits["hits"][0]["document_id"] == "worker-shutdown"
    preview = ragwright("ask", QUESTION, "--preview", home=read_only_view, check=True)
    assert "S1" in preview.stdout
    chunks = ragwright(
        "chunks", str(SAMPLES / "worker-shutdown.md"), home=read_only_view, check=True
    )
    assert "3 chunks" in chunks.stdout
    # Writing is refused in one line naming the file system fault.
    refused = one_error_line(ragwright("ingest", str(SAMPLES), home=read_only_view))
    assert "Read-only file system" in refused and str(read_only_view) in refused


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 320 MiB tmpfs: room for the samples' index and the space the engine preallocates."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=320m", "tmpfs", str(disk))
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True, timeout=CHILD_TIMEOUT)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 2**20)
                out.flush()
        except OSError:
            pass
    return filler


@pytest.mark.slow
def test_a_full_disk_ends_in_one_line_and_leaves_the_index_as_it_was(
    small_disk: Path, tmp_path: Path
) -> None:
    home = small_disk / "home"
    sources = tmp_path / "sources"
    shutil.copytree(SAMPLES, sources)
    ragwright("ingest", str(sources), home=home, check=True)
    before = json.loads(ragwright("status", "--json", home=home, check=True).stdout)
    filler = fill(small_disk)
    for command in (("search", QUESTION), ("status",), ("ask", QUESTION, "--preview")):
        line = one_error_line(ragwright(*command, home=home))
        assert "disk nearly full" in line and str(home) in line
    changed = sources / "worker-shutdown.md"
    changed.write_text(changed.read_text("utf-8") + "\nA paragraph added later.\n", "utf-8")
    assert "disk nearly full" in one_error_line(ragwright("ingest", str(sources), home=home))
    filler.unlink()
    after = json.loads(ragwright("status", "--json", home=home, check=True).stdout)
    assert after == before
    again = json.loads(ragwright("ingest", str(sources), "--json", home=home, check=True).stdout)
    assert again["embedded"] >= 1


@pytest.mark.slow
def test_redis_down_answers_without_the_shared_cache_and_warns_once(indexed_home: Path) -> None:
    from tests.scripted_openai import scripted_openai

    with scripted_openai(_quote_s1) as (base_url, requests):
        result = ragwright(
            "ask",
            QUESTION,
            "--json",
            home=indexed_home,
            RAGWRIGHT_CHAT_PROVIDER="openai",
            RAGWRIGHT_CHAT_MODEL="scripted",
            RAGWRIGHT_CHAT_BASE_URL=base_url,
            RAGWRIGHT_REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0",
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "answered"
    assert len(requests) == 1
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: Redis at redis://127.0.0.1:")
    assert "in-process capacity gate" in warnings[0]


def test_qdrant_server_down_is_one_line(tmp_path: Path) -> None:
    location = f"http://127.0.0.1:{closed_port()}"
    result = ragwright(
        "search",
        QUESTION,
        home=tmp_path,
        RAGWRIGHT_BACKEND="qdrant",
        RAGWRIGHT_QDRANT_LOCATION=location,
    )
    line = one_error_line(result)
    assert line.startswith(f"error: the index at {location} cannot be reached: ")


@pytest.mark.parametrize("question", ["", "   \t "])
def test_a_blank_question_is_refused_naming_the_field(tmp_path: Path, question: str) -> None:
    for command in ("search", "ask"):
        line = one_error_line(ragwright(command, question, home=tmp_path))
        assert line == "error: question: must not be empty or only whitespace"


def test_a_question_with_a_control_character_is_refused_naming_it(tmp_path: Path) -> None:
    for command in ("search", "ask"):
        line = one_error_line(ragwright(command, "drain\x01the queue", home=tmp_path))
        assert line == (
            "error: question: contains the control character U+0001 at position 5; send plain text"
        )


def test_a_long_question_gets_advice_for_questions(tmp_path: Path) -> None:
    words = " ".join(["why does the worker stop before the queue drains"] * 30)  # 300 words
    for command in ("search", "ask"):
        line = one_error_line(ragwright(command, words, home=tmp_path))
        assert line.startswith("error: question: has ")
        assert "the embedding model reads at most 256" in line
        assert "chunk" not in line
    pasted = one_error_line(ragwright("search", "x" * 2_001, home=tmp_path))
    assert pasted.startswith("error: question: has 2,001 characters, at most 2,000")


def test_an_empty_source_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.csv").write_text("not a document", "utf-8")
    for command in ("chunks", "ingest"):
        line = one_error_line(ragwright(command, str(folder), home=tmp_path / "home"))
        assert line == (
            f"error: {folder}: no document files (.md, .txt, .html, .htm, .docx, .pdf, .json, "
            ".jsonl) in this directory; 1 other file left out"
        )
    assert not (tmp_path / "home" / "index").exists()


def test_a_five_megabyte_word_is_refused_before_embedding(tmp_path: Path) -> None:
    source = tmp_path / "huge.md"
    source.write_text("# Huge\n\n" + "x" * 5_000_000 + "\n", "utf-8")
    line = one_error_line(
        ragwright("ingest", str(source), "--type", "runbook", "--state", "published", home=tmp_path)
    )
    assert line == (
        f"error: {source}: document 'huge', field 'sections[0].paragraphs[0]': has 5,000,000 "
        "characters, at most 100,000 are allowed: split it into paragraphs (blank lines) "
        "(nothing was written; --skip-invalid leaves it out)"
    )
    assert not os.path.exists(tmp_path / "index")

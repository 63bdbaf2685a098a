"""The conversion limits through the command line: each ``RAGWRIGHT_CONVERT_*`` setting
refuses a file past it by name (``over_limit``, the setting in the reason), the bare
command refuses a Word bomb with the defaults, and ``--skip-invalid`` leaves such files
out and lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragwright.adapters.formats.limits import MIB
from tests.adapters.formats.pdf_maker import make_pdf
from tests.adapters.formats.test_box import docx_bomb, write_docx
from tests.cli import ragwright, ragwright_process

DEFAULTS = ("--type", "note", "--state", "published")
LINE = "The worker drains queued jobs before it stops for the night. " * 3


def wordy_pdf(path: Path, pages: int) -> Path:
    path.write_bytes(make_pdf([[LINE] * 30 for _ in range(pages)]))
    return path


CASES = {
    "RAGWRIGHT_CONVERT_MAX_BYTES": (
        "2000",
        lambda folder: (folder / "note.txt").write_text("Title\n\n" + "word " * 500),
        "note.txt",
    ),
    "RAGWRIGHT_CONVERT_MAX_INFLATED": (
        str(2 * MIB),
        lambda folder: docx_bomb(folder / "policy.docx", 3 * MIB),
        "policy.docx",
    ),
    "RAGWRIGHT_CONVERT_MAX_PAGES": (
        "2",
        lambda folder: (folder / "three.pdf").write_bytes(make_pdf([["One"], ["Two"], ["Three"]])),
        "three.pdf",
    ),
    "RAGWRIGHT_CONVERT_MAX_CHARS": ("500", lambda folder: wordy_pdf(folder / "w.pdf", 2), "w.pdf"),
    "RAGWRIGHT_CONVERT_TIMEOUT": ("0.5", lambda folder: wordy_pdf(folder / "l.pdf", 250), "l.pdf"),
    "RAGWRIGHT_CONVERT_MAX_MEMORY": (
        str(32 * MIB),
        # Paragraphs, not one text node: lxml refuses a text node over 10 MB whatever
        # the memory, and a tree of 40 MiB of paragraphs needs far more than 32 MiB.
        lambda folder: docx_bomb(folder / "big.docx", 40 * MIB, paragraphs=True),
        "big.docx",
    ),
}


@pytest.mark.parametrize("setting", sorted(CASES))
def test_each_conversion_limit_refuses_a_file_past_it_by_its_setting(
    tmp_path: Path, setting: str
) -> None:
    value, write, name = CASES[setting]
    folder = tmp_path / "docs"
    folder.mkdir()
    write(folder)
    (folder / "kept.md").write_text("# Kept\n\nA short note that converts.\n")
    home = tmp_path / "h"
    # The memory limit counts what the conversion process allocates beyond its size at
    # the fork, and memory its parent freed comes on top: in this test process (a heap
    # grown by other tests) the tree could fit there, so this case runs as a user does,
    # in a process of its own.
    run = ragwright_process if setting == "RAGWRIGHT_CONVERT_MAX_MEMORY" else ragwright
    # Found in a folder, the file is left out and listed with the setting; named, refused.
    listed = run("chunks", str(folder), *DEFAULTS, home=home, **{setting: value})
    assert listed.returncode == 0, listed.stderr
    assert f"  {folder / name}: " in listed.stdout and f"({setting})" in listed.stdout
    refused = run("chunks", str(folder / name), *DEFAULTS, home=home, **{setting: value})
    assert refused.returncode == 1
    assert f"{folder / name}: " in refused.stderr and f"({setting})" in refused.stderr
    # Without the setting that limit does not refuse it (its default is far above).
    allowed = ragwright("chunks", str(folder), *DEFAULTS, home=home)
    assert f"({setting})" not in allowed.stdout + allowed.stderr


def test_the_bare_ingest_leaves_a_word_bomb_out_and_lists_it(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    docx_bomb(folder / "bomb.docx", 200 * MIB)
    write_docx(folder / "policy.docx", ["Refunds take five days to appear."])
    home = tmp_path / "h"
    refused = ragwright("ingest", str(folder / "bomb.docx"), home=home)  # named: refused
    assert refused.returncode == 1
    assert "over the limit of 64.0 MiB (RAGWRIGHT_CONVERT_MAX_INFLATED)" in refused.stderr
    assert not (home / "index").exists()
    done = ragwright("ingest", str(folder), "--json", home=home)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["documents"] == 1
    assert [(Path(s["path"]).name, s["kind"]) for s in data["skipped_files"]] == [
        ("bomb.docx", "over_limit")
    ]

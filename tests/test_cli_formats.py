"""``ragwright chunks`` and ``ingest`` on folders of mixed formats, through the command
line: metadata and its origins, unchanged re-runs, page citations, unreadable files."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from tests.adapters.formats.pdf_maker import make_pdf
from tests.adapters.formats.test_pdf_ocr import SCANNED, write_scan
from tests.cli import ragwright
from tests.conftest import REPO

MIXED = REPO / "samples" / "mixed"
DEFAULTS = ("--type", "note", "--state", "published")


def test_chunks_shows_pages_and_where_each_documents_metadata_came_from(tmp_path: Path) -> None:
    result = ragwright("chunks", str(MIXED), *DEFAULTS, home=tmp_path / "h", check=True)
    lines = result.stdout.splitlines()
    assert (
        "runbooks/payment-retries.pdf/manual-retry/p0 (23 words) [runbook, published] "
        "section-paragraphs-80w-overlap1-v1 (runbooks/payment-retries.pdf p. 2)"
    ) in lines
    rules = MIXED / "ragwright-sources.toml"
    assert (
        f"  {(MIXED / 'runbooks' / 'payment-retries.pdf').as_posix()}: "
        "id 'runbooks/payment-retries.pdf' (path), title 'Payment retries' (PDF metadata), "
        f"type runbook (rule 'runbooks/*' in {rules}), "
        f"state published (rule 'runbooks/*' in {rules}), tenant - (none)"
    ) in lines
    assert (
        f"  {(MIXED / 'vpn-access.txt').as_posix()}: id 'vpn-access.txt' (path), "
        "title 'VPN access for contractors' (first line), type note (--type), "
        "state published (--state), tenant - (none)"
    ) in lines
    assert not (tmp_path / "h").exists()


def test_chunks_without_type_gives_unlabelled_files_the_default_and_says_so(
    tmp_path: Path,
) -> None:
    result = ragwright("chunks", str(MIXED), "--state", "published", home=tmp_path)
    assert result.returncode == 0, result.stderr
    # The rules give the runbooks a type; the two other files take the default, shown.
    rules = MIXED / "ragwright-sources.toml"
    lines = result.stdout.splitlines()
    (vpn,) = [line for line in lines if line.startswith(f"  {MIXED / 'vpn-access.txt'}: ")]
    assert "type runbook (default), state published (--state)" in vpn
    (pdf,) = [line for line in lines if "payment-retries.pdf: " in line]
    assert f"type runbook (rule 'runbooks/*' in {rules})" in pdf


@pytest.mark.slow
def test_a_mixed_folder_ingests_once_cites_pages_and_reingests_nothing(tmp_path: Path) -> None:
    home = tmp_path / "h"
    first = json.loads(
        ragwright("ingest", str(MIXED), *DEFAULTS, "--json", home=home, check=True).stdout
    )
    assert first["documents"] == 5 and first["embedded"] == first["chunks"] > 0
    assert {m["document_id"]: m["title_from"] for m in first["metadata"]} == {
        "change-freeze": "first heading",
        "runbooks/cache-eviction.html": "<title>",
        "runbooks/database-backups.docx": "DOCX properties",
        "runbooks/payment-retries.pdf": "PDF metadata",
        "vpn-access.txt": "first line",
    }
    again = json.loads(
        ragwright("ingest", str(MIXED), *DEFAULTS, "--json", home=home, check=True).stdout
    )
    assert (again["embedded"], again["unchanged"], again["payload_updated"]) == (
        0,
        first["chunks"],
        0,
    )

    question = "How many times is a failed card payment retried automatically?"
    search = json.loads(ragwright("search", question, "--json", home=home, check=True).stdout)
    top = search["hits"][0]
    assert (top["document_id"], top["pages"], top["location"]) == (
        "runbooks/payment-retries.pdf",
        [1, 1],
        "runbooks/payment-retries.pdf p. 1",
    )
    shown = ragwright("search", question, "--k", "1", home=home, check=True).stdout.splitlines()
    assert shown[1] == "from runbooks/payment-retries.pdf p. 1"
    answer = ragwright("ask", question, "--style", "evidence", home=home, check=True).stdout
    assert "(runbooks/payment-retries.pdf p. 1)" in answer


def _unreadable(folder: Path) -> Path:
    from pypdf import PdfReader, PdfWriter

    shutil.copytree(MIXED, folder)
    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(make_pdf([["Secret plan"]]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    with (folder / "locked.pdf").open("wb") as handle:
        writer.write(handle)
    (folder / "scan.pdf").write_bytes(make_pdf([["x"]], picture_pages=[0]))
    return folder


def test_unreadable_files_of_a_folder_are_left_out_and_a_named_one_is_refused(
    tmp_path: Path,
) -> None:
    folder = _unreadable(tmp_path / "docs")
    refused = ragwright("ingest", str(folder / "locked.pdf"), home=tmp_path / "h")
    assert refused.returncode == 1
    assert f"{folder / 'locked.pdf'}: password-protected" in refused.stderr
    assert not (tmp_path / "h" / "index").exists()
    result = ragwright("ingest", str(folder), home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    assert f"  {folder / 'locked.pdf'}: password-protected" in result.stdout
    assert f"  {folder / 'scan.pdf'}: no text layer" in result.stdout


@pytest.mark.slow
def test_skip_invalid_leaves_unreadable_files_out_and_names_them(tmp_path: Path) -> None:
    folder = _unreadable(tmp_path / "docs")
    home = tmp_path / "h"
    data = json.loads(
        ragwright(
            "ingest", str(folder), *DEFAULTS, "--skip-invalid", "--json", home=home, check=True
        ).stdout
    )
    assert data["documents"] == 5
    assert {(Path(s["path"]).name, s["kind"]) for s in data["skipped_files"]} == {
        ("locked.pdf", "password_protected"),
        ("scan.pdf", "no_text_layer"),
    }
    text = ragwright(
        "ingest", str(folder), *DEFAULTS, "--skip-invalid", home=home, check=True
    ).stdout
    assert "skipped 2 files:" in text
    assert f"  {folder / 'locked.pdf'}: password-protected" in text


@pytest.mark.usefixtures("tesseract_installed")
def test_chunks_of_a_scan_say_ocr_and_without_tesseract_it_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_scan(folder, [[], SCANNED])
    result = ragwright("chunks", str(folder), *DEFAULTS, home=tmp_path / "h", check=True)
    lines = result.stdout.splitlines()
    assert any(
        line.startswith("scan.pdf/page-2-ocr/p0 ") and line.endswith("(scan.pdf p. 2)")
        for line in lines
    ), result.stdout
    assert "Page 2 (OCR)" in lines
    # Where no tesseract is on PATH its picture page is left out (the text page read) ...
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    without = ragwright(
        "chunks", str(folder), *DEFAULTS, home=tmp_path / "h", PATH=str(empty), check=True
    )
    assert "scan.pdf/page-1/p0 " in without.stdout and "OCR" not in without.stdout
    # ... and a file of pictures only, named, is refused as before, with the hint.
    only = tmp_path / "scans"
    only.mkdir()
    write_scan(only, [SCANNED])
    (scan,) = only.iterdir()
    refused = ragwright("chunks", str(scan), *DEFAULTS, home=tmp_path / "h", PATH=str(empty))
    assert refused.returncode == 1
    assert "no text layer: 1 page of pictures only (a scan?)" in refused.stderr
    assert "install tesseract-ocr and tesseract-ocr-eng" in refused.stderr

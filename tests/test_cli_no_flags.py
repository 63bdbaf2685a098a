"""A team's folder through the bare commands: ``ragwright ingest FOLDER`` then
``ragwright ask "..."`` with no flags, on real files (the public test PDFs, a folder of
every format, Markdown written for another tool), and what each run left out and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.adapters.formats.pdf_maker import make_pdf
from tests.adapters.formats.test_converters import PAGE, make_docx
from tests.cli import ragwright, write_tree
from tests.conftest import shared_data


def _ingest(folder: Path, home: Path, *flags: str, **env: str) -> dict[str, Any]:
    result = ragwright("ingest", str(folder), *flags, "--json", home=home, **env)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _ask(question: str, home: Path) -> dict[str, Any]:
    result = ragwright("ask", question, "--json", home=home)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _cited(answer: dict[str, Any]) -> set[str]:
    return {c["document_id"] for c in answer["citations"]}


def test_the_public_pdf_samples_go_in_with_no_flags_and_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = _ingest(shared_data("documents", "pdf-samples"), home)
    kinds: dict[str, list[str]] = {}
    for skipped in data["skipped_files"]:
        kinds.setdefault(skipped["kind"], []).append(Path(skipped["path"]).name)
    # 20 PDFs read; every other file is left out, each with its reason and kind.
    pdfs = [m for m in data["metadata"] if m["source"].endswith(".pdf")]
    assert len(pdfs) == 20
    assert kinds["password_protected"] == ["libreoffice-writer-password.pdf"]
    assert len(kinds["no_text_layer"]) == 6 and len(kinds["garbled"]) == 3
    assert kinds["not_documents"] == ["files.json"]
    assert all(s["reason"] for s in data["skipped_files"])
    assert data["skipped_documents"] == []
    # The documents the seed policy refused as oversize are written, split at sentences.
    assert data["split_documents"] >= 5
    assert any(s.endswith("GeoTopo-komprimiert.pdf") for s in data["split_sources"])
    assert {(m["type_from"], m["state_from"]) for m in data["metadata"]} == {("default", "default")}
    answer = _ask("Who are the people who change the world?", home)
    assert answer["status"] == "answered", answer
    assert _cited(answer) & {
        "021-pdfa/crazyones-pdfa.pdf",
        "013-reportlab-overlay/reportlab-overlay.pdf",
    }


def test_a_folder_of_every_format_goes_in_with_no_flags(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    long_paragraph = " ".join(
        f"Step {i} of the failover moves replica {i} to the standby region." for i in range(30)
    )
    write_tree(
        folder,
        {
            "notes.md": "# Disk alerts\n\nWhen a disk alert fires, check df first.\n",
            "labelled.md": "---\ndocument_type: note\npublication_state: draft\n---\n"
            "# Draft plan\n\nThe draft says the cache is flushed hourly.\n",
            "todo.txt": "Rotate the signing keys every Monday morning.\n",
            "guides/incident.html": PAGE,
        },
    )
    (folder / "guides" / "failover.txt").write_text(f"Failover\n\n{long_paragraph}\n")
    make_docx(folder / "guides" / "backup.docx")
    (folder / "guides" / "restart.pdf").write_bytes(
        make_pdf([["Restart", "Drain the queue, then restart the worker."]], title="Restart")
    )
    (folder / "scan.pdf").write_bytes(make_pdf([["x"]], picture_pages=[0]))
    home = tmp_path / "home"
    data = _ingest(folder, home)
    written = {m["document_id"]: (m["type_from"], m["state_from"]) for m in data["metadata"]}
    assert written == {
        "guides/backup.docx": ("default", "default"),
        "guides/failover.txt": ("default", "default"),
        "guides/incident.html": ("default", "default"),
        "labelled": ("front matter", "front matter"),
        "guides/restart.pdf": ("default", "default"),
        "notes": ("default", "default"),
        "todo.txt": ("default", "default"),
    }
    assert [(Path(s["path"]).name, s["kind"]) for s in data["skipped_files"]] == [
        ("scan.pdf", "no_text_layer")
    ]
    assert data["split_sources"] == [str(folder / "guides" / "failover.txt")]
    answer = _ask("How often are the signing keys rotated?", home)
    assert answer["status"] == "answered" and _cited(answer) == {"todo.txt"}, answer
    # The draft note is not searched by default, and the result says what it left out.
    drafted = _ask("How often is the cache flushed?", home)
    assert "labelled" not in _cited(drafted)
    assert drafted["searched"]["states"] == ["published"]


def test_markdown_written_for_another_tool_goes_in_with_no_flags(tmp_path: Path) -> None:
    separator = "|" + "-" * 300 + "|"
    folder = write_tree(
        tmp_path / "docs",
        {
            # Another site generator's front matter, no ids, a front-matter-only index.
            "index.md": "---\ntitle: Overview\nsort_rank: 1\nnav_icon: home\n---\n",
            "guides/storage.md": "---\ntitle: Storage\nsort_rank: 2\nnav_title: Disk\n---\n\n"
            "## Retention\n\nBlocks are kept for fifteen days by default; the retention\n"
            "flag changes how long the server keeps them.\n\n"
            f"| Flag | Default |\n{separator}\n| retention | 15d |\n",
            "guides/index.md": "## Guides\n\nEvery guide of the team lives in this folder.\n",
        },
    )
    home = tmp_path / "home"
    data = _ingest(folder, home)
    assert sorted(m["document_id"] for m in data["metadata"]) == [
        "guides/index",
        "guides/storage",
    ]
    assert [Path(s["path"]).name for s in data["skipped_files"]] == ["index.md"]
    answer = _ask("How long are blocks kept by default?", home)
    assert answer["status"] == "answered" and _cited(answer) == {"guides/storage"}, answer
    # The citation names the file below the ingested folder, not a bare "index.md".
    assert all(c["location"].startswith("guides/") for c in answer["citations"])


def test_a_run_that_writes_nothing_leaves_no_collection_bound_to_its_policy(
    tmp_path: Path,
) -> None:
    # Refused by the validation pass, after the collection was opened for writing.
    heading = " ".join(f"w{i}" for i in range(90))
    folder = write_tree(tmp_path / "docs", {"a.md": f"# A\n\n## {heading}\n\nText.\n"})
    home = tmp_path / "home"
    failed = ragwright("ingest", str(folder), home=home)
    assert failed.returncode == 1 and "the heading alone has 90 words" in failed.stderr
    (folder / "a.md").write_text("# A\n\nText.\n", "utf-8")
    data = _ingest(folder, home, "--policy", "sentence-blocks")
    assert data["chunking_version"].startswith("sentence-blocks") and data["embedded"] == 1


def test_every_document_problem_is_named_in_one_run_and_skip_invalid_writes_the_rest(
    tmp_path: Path,
) -> None:
    heading = " ".join(f"word{i}" for i in range(90))
    folder = write_tree(
        tmp_path / "docs",
        {
            "good.md": "# Good\n\nThe good page is written.\n",
            "long-heading.md": f"# Long\n\n## {heading}\n\nText.\n",
            "typo.md": "---\ndocumnt_type: note\n---\n# Typo\n\nText.\n",
        },
    )
    home = tmp_path / "home"
    refused = ragwright("ingest", str(folder), home=home)
    assert refused.returncode == 1
    # Both kinds of problem in one run: the file's front matter and the document's heading.
    assert "typo.md" in refused.stderr and "long-heading.md" in refused.stderr
    assert "--skip-invalid" in refused.stderr
    data = _ingest(folder, home, "--skip-invalid")
    assert [m["document_id"] for m in data["metadata"]] == ["good", "long-heading"]
    assert [(d["document_id"], d["field"]) for d in data["skipped_documents"]] == [
        ("long-heading", "chunking")
    ]
    assert "the heading alone has 90 words" in data["skipped_documents"][0]["reason"]
    assert [Path(s["path"]).name for s in data["skipped_files"]] == ["typo.md"]
    assert data["documents"] == 2 and data["embedded"] == 1


def test_metadata_values_are_named_with_where_they_came_from_and_a_near_spelling(
    tmp_path: Path,
) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            "disk.md": "---\ndocument_type: runbok\npublication_state: publised\n---\n# D\n\nT.\n",
            "hugo.md": "---\ntitle: Deploy\ndraft: true\nweight: 3\n---\n\nWe deploy on Fridays.\n",
            "LICENSE": "MIT\n",
        },
    )
    home = tmp_path / "home"
    refused = ragwright("ingest", str(folder), home=home)
    assert refused.returncode == 1
    (line,) = refused.stderr.splitlines()  # both fields of the file, in one line
    assert "'runbok' (from the file's front matter)" in line and "did you mean 'runbook'?" in line
    assert "'publised'" in line and "did you mean 'published'?" in line
    assert line.endswith("(nothing was written; --skip-invalid leaves it out)")
    once = ragwright("ingest", str(folder), "--type", "docs", home=home)
    (line,) = once.stderr.splitlines()  # one problem of the command line, not one a file
    assert line.startswith("error: --type: document_type 'docs' is not one of")
    assert 'RAGWRIGHT_DOCUMENT_TYPES=\'["runbook", "note", "docs"]\'' in line
    (folder / "disk.md").unlink()
    data = _ingest(folder, home)
    (hugo,) = data["metadata"]
    assert (hugo["publication_state"], hugo["state_from"]) == ("draft", "front matter")
    assert [(Path(s["path"]).name, s["kind"]) for s in data["skipped_files"]] == [
        ("LICENSE", "not_a_document")
    ]


def test_a_run_whose_every_file_is_left_out_is_refused_naming_each(tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "docs", {"bad.md": "---\ntenat: acme\n---\n# B\n\nText.\n"})
    refused = ragwright("ingest", str(folder), "--skip-invalid", home=tmp_path / "home")
    assert refused.returncode == 1
    assert "no document could be read; every file was left out:" in refused.stderr
    assert f"{folder / 'bad.md'}: front matter key 'tenat'" in refused.stderr
    assert not (tmp_path / "home" / "index").exists()


def test_skip_invalid_leaves_out_a_document_a_remote_embedder_refuses(tmp_path: Path) -> None:
    """A remote model counts no tokens here: the provider refuses an input over its limit
    (HTTP 400, ``invalid_input``) only when it is sent; --skip-invalid leaves that
    document out and writes the rest, without it the run stops."""
    from tests.scripted_openai import scripted_embeddings

    dense = " ".join(["a-b-c-d-e-f-g-h"] * 75)  # 75 words, about 1,100 tokens
    folder = write_tree(
        tmp_path / "docs",
        {"ok.md": "# Ok\n\nShort and fine.\n", "dense.md": f"# Dense\n\n{dense}\n"},
    )
    with scripted_embeddings() as server:
        remote = server.env(RAGWRIGHT_REMOTE_CALL_ATTEMPTS="1")
        home = tmp_path / "home"
        stopped = ragwright("ingest", str(folder), home=home, **remote)
        assert stopped.returncode == 1 and "invalid_input" in stopped.stderr, stopped.stderr
        data = _ingest(folder, home, "--skip-invalid", **remote)
    assert [(d["document_id"], d["field"]) for d in data["skipped_documents"]] == [
        ("dense", "embedding_input")
    ]
    assert data["documents"] == 2 and data["embedded"] == 1

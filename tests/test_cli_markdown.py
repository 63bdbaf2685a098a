"""``ragwright chunks`` and ``ingest`` on Markdown as people and other tools write it:
no title, an empty section before a sub-heading, another tool's front matter, files of
the same name in different folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import ragwright, write_tree

DEFAULTS = ("--type", "note", "--state", "published")


def _chunks(folder: Path, home: Path) -> dict[str, dict[str, object]]:
    result = ragwright("chunks", str(folder), *DEFAULTS, "--json", home=home, check=True)
    return {f"{c['document_id']}/{c['chunk_id']}": c for c in json.loads(result.stdout)}


def test_markdown_without_a_title_is_named_after_its_file_and_says_so(tmp_path: Path) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            "starts-with-h2.md": "## Install\n\nRun the installer.\n",
            "plain.md": "Just some text with no heading.\n\nA second paragraph.\n",
        },
    )
    result = ragwright("chunks", str(folder), *DEFAULTS, home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    assert "no title" not in result.stderr
    lines = result.stdout.splitlines()
    for stem in ("starts-with-h2", "plain"):
        (origin,) = [line for line in lines if line.startswith(f"  {folder / stem}.md: ")]
        assert f"title {stem!r} (file name)" in origin, origin
    chunks = _chunks(folder, tmp_path / "h")
    assert chunks["starts-with-h2/install/p0"]["text"] == "Install\n\nRun the installer."
    # Text before any heading is the intro, headed by the title the file name gave.
    assert chunks["plain/intro/p0"]["text"] == (
        "plain\n\nJust some text with no heading.\n\nA second paragraph."
    )


def test_an_empty_section_before_a_sub_heading_is_merged_not_a_failure(tmp_path: Path) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            # An h1 after the title is a section; here it holds only the next heading.
            "upgrade.md": "# Upgrading\n\nRead this first.\n\n# Breaking Changes\n\n"
            "## API Changes\n\nThe v1 API is gone.\n\n## Removed\n\n## Config\n\nRenamed keys.\n",
            # A ### stays in its section with the block after it, as it always has.
            "nested.md": "# Upgrading\n\n## Breaking Changes\n\n### API Changes\n\n"
            "The v1 API is gone.\n",
        },
    )
    chunks = _chunks(folder, tmp_path / "h")
    assert sorted(chunks) == [
        "nested/breaking-changes/p0",
        "upgrade/api-changes/p0",
        "upgrade/config/p0",
        "upgrade/intro/p0",
    ]
    # The empty section's heading is kept as the first line of the next section's text.
    assert chunks["upgrade/api-changes/p0"]["text"] == (
        "API Changes\n\nBreaking Changes\nThe v1 API is gone."
    )
    assert chunks["upgrade/config/p0"]["text"] == "Config\n\nRemoved\nRenamed keys."
    assert chunks["nested/breaking-changes/p0"]["text"] == (
        "Breaking Changes\n\n### API Changes\nThe v1 API is gone."
    )


def test_another_tools_front_matter_gives_its_title_and_the_rest_is_ignored(
    tmp_path: Path,
) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            "alerting.md": "---\ntitle: Alerting overview\nsort_rank: 3\nnav_title: Alerts\n"
            "nav_icon: bell\n---\n\n## Overview\n\nAlertmanager routes alerts.\n",
        },
    )
    result = ragwright("chunks", str(folder), *DEFAULTS, home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    assert "title 'Alerting overview' (front matter)" in result.stdout
    chunks = _chunks(folder, tmp_path / "h")
    assert chunks["alerting/overview/p0"]["text"] == "Overview\n\nAlertmanager routes alerts."


def test_a_navigation_page_of_only_front_matter_is_left_out_as_a_file_with_no_text(
    tmp_path: Path,
) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            "alerting/index.md": "---\ntitle: Alertmanager\nsort_rank: 7\nnav_icon: bell\n---\n",
            "alerting/overview.md": "---\ntitle: Overview\nsort_rank: 1\n---\n\nRoutes alerts.\n",
        },
    )
    stub = folder / "alerting" / "index.md"
    listed = ragwright("chunks", str(folder), home=tmp_path / "h")  # no flags
    assert listed.returncode == 0, listed.stderr
    assert f"  {stub}: holds no text, only front matter" in listed.stdout.splitlines()
    assert "alerting/overview/intro/p0" in _chunks_skipping(folder, tmp_path / "h")
    refused = ragwright("chunks", str(stub), home=tmp_path / "h")  # named: refused
    assert refused.returncode == 1
    assert f"{stub}: holds no text, only front matter" in refused.stderr


def _chunks_skipping(folder: Path, home: Path) -> list[str]:
    result = ragwright("chunks", str(folder), "--json", home=home, check=True)
    return [f"{c['document_id']}/{c['chunk_id']}" for c in json.loads(result.stdout)]


def test_a_near_miss_of_a_ragwright_key_is_still_refused_as_a_typo(tmp_path: Path) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {"a.md": "---\npublication_sate: draft\nnav_icon: bell\n---\n# A\n\nText.\n"},
    )
    result = ragwright("chunks", str(folder), *DEFAULTS, home=tmp_path / "h")
    assert result.returncode == 1
    assert (
        f"{folder / 'a.md'}: front matter key 'publication_sate' is not one ragwright "
        "reads: did you mean 'publication_state'?"
    ) in result.stderr


def test_a_location_names_the_path_below_the_ingested_folder(tmp_path: Path) -> None:
    folder = write_tree(
        tmp_path / "manual",
        {
            "index.md": "# Manual\n\nStart here.\n",
            "docs/index.md": "# Docs\n\nThe docs start here.\n",
            "docs/ops/index.md": "# Operations\n\nRun it.\n",
        },
    )
    chunks = _chunks(folder, tmp_path / "h")
    assert {key: chunk["location"] for key, chunk in chunks.items()} == {
        "index/intro/p0": "index.md",
        "docs/index/intro/p0": "docs/index.md",
        "docs/ops/index/intro/p0": "docs/ops/index.md",
    }
    lines = ragwright("chunks", str(folder), *DEFAULTS, home=tmp_path / "h").stdout.splitlines()
    assert any(
        line.startswith("docs/ops/index/intro/p0 ") and line.endswith(" (docs/ops/index.md)")
        for line in lines
    ), lines


@pytest.mark.slow
def test_ingest_reports_the_file_name_title_and_search_cites_the_path(tmp_path: Path) -> None:
    folder = write_tree(
        tmp_path / "manual",
        {
            "docs/index.md": "## Rotation\n\nThe signing key is rotated every 90 days.\n",
            "index.md": "---\ntitle: Manual\nsort_rank: 1\n---\n\nStart here.\n",
        },
    )
    home = tmp_path / "h"
    ingested = json.loads(
        ragwright("ingest", str(folder), *DEFAULTS, "--json", home=home, check=True).stdout
    )
    assert {m["document_id"]: (m["title"], m["title_from"]) for m in ingested["metadata"]} == {
        "docs/index": ("index", "file name"),
        "index": ("Manual", "front matter"),
    }
    question = "How often is the signing key rotated?"
    search = json.loads(
        ragwright("search", question, "--type", "note", "--json", home=home, check=True).stdout
    )
    top = search["hits"][0]
    assert (top["document_id"], top["location"]) == ("docs/index", "docs/index.md")

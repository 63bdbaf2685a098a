"""What a person sees after ``ingest --policy sentence-blocks --max-words 400`` (issue 24
item 7): ``search``, ``ask`` and ``eval run`` read the chunking version the index holds
instead of answering "no eligible evidence"; with several versions the output names the
one read and the others; a question about a note says how many chunks the default types
and states left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli import copy_home, ragwright
from tests.conftest import SAMPLES

QUESTION = "Should I drain all queued work during shutdown?"
NOTE_QUESTION = "How do producers behave when the queue channel is full?"
DEFAULT = "section-paragraphs-80w-overlap1-v1"
BLOCKS = "sentence-blocks-400w-overlap1-v1"
FILES = ("worker-shutdown.md", "worker-shutdown-draft.md", "queue-capacity-note.md")
CASE = {
    "id": "drain",
    "category": "condition",
    "question": QUESTION,
    "relevant": [
        {"document_id": "worker-shutdown", "chunk_id": "shutdown-and-the-queue/p0", "grade": 2}
    ],
}
EVIDENCE = ("--style", "evidence")  # no model: what is read is the point here


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("left-out") / "corpus"
    root.mkdir()
    for name in FILES:
        shutil.copy(SAMPLES / name, root / name)
    (root.parent / "cases.jsonl").write_text(json.dumps(CASE) + "\n", "utf-8")
    return root


@pytest.fixture(scope="module")
def blocks_home(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("blocks") / "home"
    ragwright(
        "ingest", str(corpus), "--policy", "sentence-blocks", "--max-words", "400",
        home=home, check=True,
    )  # fmt: skip
    return home


def _json(*args: str, home: Path, **env: str) -> Any:
    return json.loads(ragwright(*args, "--json", home=home, check=True, **env).stdout)


def test_search_ask_and_eval_read_the_version_the_index_holds(
    corpus: Path, blocks_home: Path
) -> None:
    found = _json("search", QUESTION, home=blocks_home)
    assert found["hits"] and {h["chunking_version"] for h in found["hits"]} == {BLOCKS}
    assert (found["chunking_version"], found["chunking_version_source"]) == (BLOCKS, "index")
    answer = _json("ask", QUESTION, *EVIDENCE, home=blocks_home)
    assert answer["status"] == "evidence_only" and answer["quotes"]
    assert answer["options"]["chunking_version"] == BLOCKS
    assert answer["chunking_version_source"] == "index"
    # The case's label is a chunk both policies make: found once the right version is read.
    cases = str(corpus.parent / "cases.jsonl")
    run = _json("eval", "run", cases, home=blocks_home)
    assert run["summary"]["K"]["5"]["recall"] == 1.0
    assert (run["chunking_version"], run["chunking_version_source"]) == (BLOCKS, "index")


def test_an_asked_for_version_is_read_and_the_others_named(blocks_home: Path) -> None:
    asked = ragwright(
        "search", QUESTION, "--chunking-version", DEFAULT, home=blocks_home, check=True
    ).stdout
    assert "No eligible evidence" in asked
    assert f"note: only chunking version {DEFAULT} was searched (as asked)" in asked
    assert f"chunks under {BLOCKS}" in asked
    # A chunking setting given (here at its default value) is asked for too.
    configured = ragwright(
        "ask", QUESTION, *EVIDENCE, home=blocks_home, check=True, RAGWRIGHT_MAX_WORDS="80"
    ).stdout
    assert "[no eligible evidence]" in configured
    assert (
        f"note: only chunking version {DEFAULT} was searched (the one the chunking "
        "settings produce)" in configured
    )


def test_with_several_versions_the_result_names_the_one_read_and_the_others(
    corpus: Path, blocks_home: Path, tmp_path: Path
) -> None:
    home = copy_home(blocks_home, tmp_path / "home")
    ragwright("ingest", str(corpus), "--add-chunking-version", home=home, check=True)
    searched = ragwright("search", QUESTION, home=home, check=True).stdout
    assert f"[{DEFAULT}]" in searched and f"[{BLOCKS}]" not in searched
    assert (
        f"note: only chunking version {DEFAULT} was searched (the default policy's, as the "
        "index holds chunks under several)" in searched
    )
    answer = _json("ask", QUESTION, *EVIDENCE, home=home)
    assert answer["options"]["chunking_version"] == DEFAULT
    assert answer["chunking_version_source"] == "default"
    assert set(answer["excluded_versions"]) == {BLOCKS}
    run = _json("eval", "run", str(corpus.parent / "cases.jsonl"), home=home)
    assert run["chunking_version"] == DEFAULT and set(run["excluded_versions"]) == {BLOCKS}
    shown = ragwright("eval", "run", str(corpus.parent / "cases.jsonl"), home=home).stdout
    assert f"chunks under {BLOCKS}" in shown


def test_a_question_about_a_note_says_what_the_default_eligibility_left_out(
    blocks_home: Path,
) -> None:
    said = ragwright("ask", NOTE_QUESTION, *EVIDENCE, home=blocks_home, check=True).stdout
    assert (
        "note: searched published runbook documents (the default eligibility); draft "
        "documents and documents of other types were not searched; the index also holds "
        "1 chunk of type note, 2 chunks in state draft" in said
    )
    assert "(pass --type or --state, repeatable, to search those too)" in said
    answer = _json("ask", NOTE_QUESTION, *EVIDENCE, home=blocks_home)
    assert (answer["excluded_types"], answer["excluded_states"]) == ({"note": 1}, {"draft": 2})
    assert answer["searched"] == {
        "types": ["runbook"],
        "types_source": "default",
        "states": ["published"],
        "states_source": "default",
        "note": "searched published runbook documents (the default eligibility); draft "
        "documents and documents of other types were not searched",
    }
    searched = _json("search", NOTE_QUESTION, "--type", "note", home=blocks_home)
    assert searched["hits"][0]["document_id"] == "queue-capacity-note"
    # Only a named type: the drafts are runbooks, no note is a draft.
    assert (searched["excluded_types"], searched["excluded_states"]) == ({}, {})


def test_the_note_names_the_types_asked_for_not_the_default(
    corpus: Path, blocks_home: Path
) -> None:
    """Issue 47: with ``--type runbook --type note`` the note said "only published runbook
    documents were searched (the default eligibility)"."""
    types = ("--type", "runbook", "--type", "note")
    note = (
        "note: searched published runbook and note documents (types as asked, state by "
        "default); draft documents and documents of other types were not searched; the "
        "index also holds 2 chunks in state draft meeting the other conditions (pass "
        "--state, repeatable, to search those too)."
    )
    cases = str(corpus.parent / "cases.jsonl")
    for command in (
        ("ask", NOTE_QUESTION, *types, *EVIDENCE),
        ("search", NOTE_QUESTION, *types),
        ("eval", "run", cases, *types),
    ):
        said = ragwright(*command, home=blocks_home, check=True).stdout
        assert note in said, command
        assert "default eligibility" not in said, command
        data = _json(*command, home=blocks_home)
        assert data["searched"] == {
            "types": ["runbook", "note"],
            "types_source": "request",
            "states": ["published"],
            "states_source": "default",
            "note": note.removeprefix("note: ").split("; the index")[0],
        }, command
        assert (data["excluded_types"], data["excluded_states"]) == ({}, {"draft": 2})

"""`ragwright ask --progress` says what it is doing and how long it took, on stderr only."""

from __future__ import annotations

import io
from pathlib import Path

from ragwright.cli.stage_display import StageDisplay
from ragwright.stages import announce, listening
from tests.test_cli import ragwright

QUESTION = "Should I drain all queued work during shutdown?"


def test_ask_progress_names_each_stage_and_the_time_taken(indexed_home: Path) -> None:
    result = ragwright(
        "ask", QUESTION, "--style", "evidence", "--progress", home=indexed_home, check=True
    )
    lines = result.stderr.splitlines()
    assert lines[0].startswith("ask: opening the index and loading the embedding model (at ")
    assert any(line.startswith("ask: retrieving evidence (at ") for line in lines)
    assert lines[-1].startswith("ask: took ") and "retrieve " in lines[-1]
    assert QUESTION not in result.stderr  # stages only, never the question or a text
    assert "NOT AN ANSWER" in result.stdout and "ask:" not in result.stdout


def test_without_progress_a_pipe_gets_the_answer_only(indexed_home: Path) -> None:
    result = ragwright("ask", QUESTION, "--style", "evidence", home=indexed_home, check=True)
    assert "ask:" not in result.stderr


def test_a_model_start_is_named_while_it_happens() -> None:
    clock = iter([0.0, 0.0, 0.5, 2.0, 9.5, 10.0]).__next__
    stream = io.StringIO()
    display = StageDisplay(force_lines=True, stream=stream, clock=clock)
    with display, listening(display):
        announce("start-model")
        announce("generate")
    display.finish({"generate": 9000.0, "retrieve": 500.0})
    assert stream.getvalue().splitlines() == [
        "ask: opening the index and loading the embedding model (at 0.5 s)",
        "ask: starting the local model (later commands reuse it) (at 2.0 s)",
        "ask: waiting for the model's answer (at 9.5 s)",
        "ask: took 10.0 s (generate 9.0 s, retrieve 0.5 s)",
    ]

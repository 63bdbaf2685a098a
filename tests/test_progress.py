"""Progress on stderr: a bar on a terminal, periodic lines with --progress elsewhere."""

from __future__ import annotations

import io

from ragwright.cli.progress import ProgressDisplay


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_forced_lines_report_count_rate_and_eta_at_each_interval() -> None:
    stream, clock = io.StringIO(), Clock()
    with ProgressDisplay(force_lines=True, interval=5.0, stream=stream, clock=clock) as show:
        show("plan", 100)
        show("unchanged", 10)
        clock.now += 4
        show("embedded", 10)  # before the interval: no line yet
        assert stream.getvalue() == ""
        clock.now += 1
        show("embedded", 5)
        assert (
            stream.getvalue()
            == "progress: 25/100 chunks (25%), 5.0 chunks/s, elapsed 5s, ETA 15s\n"
        )
        show("switched", 25)  # not a unit of work: no effect
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("progress: 25/100 chunks")


def test_each_total_starts_a_phase_with_its_own_unit() -> None:
    stream, clock = io.StringIO(), Clock()
    with ProgressDisplay(force_lines=True, interval=1.0, stream=stream, clock=clock) as show:
        show("questions", 4)
        clock.now += 2
        show("retrieved", 4)
        show("combinations", 9)
        clock.now += 3
        show("swept", 3)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("progress: 4/4 questions (100%)")
    assert lines[-1].startswith("progress: 3/9 combinations (33%), 1.0 combinations/s")
    assert "ETA 6s" in lines[-1]


def test_nothing_is_printed_off_a_terminal_without_the_flag() -> None:
    stream, clock = io.StringIO(), Clock()
    with ProgressDisplay(stream=stream, clock=clock) as show:
        show("plan", 10)
        clock.now += 60
        show("embedded", 10)
    assert stream.getvalue() == ""

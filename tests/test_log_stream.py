"""The service's log lines go to the stderr of the moment, never to a closed stream."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest

from ragwright.cli.serve import log_to_stderr


@pytest.fixture
def ragwright_log() -> Iterator[logging.Logger]:
    log = logging.getLogger("ragwright")
    handlers, level = list(log.handlers), log.level
    log.handlers.clear()
    yield log
    log.handlers[:] = handlers
    log.setLevel(level)


def test_a_line_logged_after_the_first_stderr_closed_reaches_the_current_one(
    ragwright_log: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    log_to_stderr()  # as `serve` run in-process by a test runner does
    first.close()  # that runner closed its capture
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    logging.getLogger("ragwright.service").info("GET / 200 1.0ms")
    assert now.getvalue() == "INFO: ragwright.service: GET / 200 1.0ms\n"

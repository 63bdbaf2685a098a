"""An answer run that has not finished: its configuration and the answers it gave,
persisted one case at a time so an interrupted run loses at most the answer it was
waiting for, and resumed only under the same configuration (docs/evaluation.md,
"Interrupted runs and --resume"). :func:`ragwright.pipeline.evaluate.save_run` ends the
log when the run's record is written."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragwright.errors import EvaluationError


class StartedRun(Protocol):
    """What a log records of the run it belongs to (a
    :class:`ragwright.pipeline.evaluate.RunRecord`)."""

    @property
    def execution_id(self) -> str: ...
    @property
    def created_at(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...


# An answer run's directory while it runs: what it runs under, and one line per answer.
PENDING = "pending.json"
ANSWERS = "answers.jsonl"
# Configuration a resumed run may differ in: where the dataset file lies (its digest is
# compared) and the code's revision.
MAY_DIFFER = frozenset({"dataset", "code_revision"})


@dataclass(slots=True)
class AnswerLog:
    """The answers of an unfinished answer run, persisted one case at a time.

    ``<home>/evaluations/<execution-id>/pending.json`` holds the run's execution id,
    creation time, configuration and case count; ``answers.jsonl`` gets one line
    ``{"id": case id, "answer": scored answer}`` per answered case, flushed to disk
    before the next case starts. :func:`save_run` removes both once run.json is written.
    """

    directory: Path
    execution_id: str
    created_at: str
    config: dict[str, Any]
    cases: int
    answered: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def start(cls, record: StartedRun, cases: int, home: Path) -> AnswerLog:
        """A new log for ``record`` (its directory must not exist yet)."""
        directory = home / "evaluations" / record.execution_id
        directory.mkdir(parents=True, exist_ok=False)
        log = cls(directory, record.execution_id, record.created_at, record.config, cases)
        (directory / PENDING).write_text(
            json.dumps(
                {
                    "execution_id": log.execution_id,
                    "created_at": log.created_at,
                    "cases": cases,
                    "config": log.config,
                },
                indent=2,
                ensure_ascii=False,
            ),
            "utf-8",
        )
        (directory / ANSWERS).touch()
        return log

    @classmethod
    def open(cls, reference: str, home: Path) -> AnswerLog:
        """The unfinished run ``reference`` names (execution id or directory; ``latest``:
        the most recently started unfinished run) with the answers it recorded; a last
        line cut short by a kill is not an answer."""
        directory = _unfinished(reference, home)
        pending = json.loads((directory / PENDING).read_text("utf-8"))
        log = cls(
            directory,
            str(pending["execution_id"]),
            str(pending["created_at"]),
            dict(pending["config"]),
            int(pending["cases"]),
        )
        answers = directory / ANSWERS
        lines = answers.read_text("utf-8").splitlines() if answers.is_file() else []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # the line being written when the run was killed
            log.answered[str(entry["id"])] = entry["answer"]
        return log

    def differences(self, config: dict[str, Any], *, partial: bool = False) -> list[str]:
        """What differs between the run's configuration and ``config`` (``key: recorded
        → now``, nested keys dotted), but for :data:`MAY_DIFFER`; ``partial``: only the
        keys ``config`` has (what is known before retrieval runs)."""
        recorded = {k: self.config.get(k) for k in config} if partial else self.config
        return _differences(recorded, config, "", MAY_DIFFER)

    def record(self, case_id: str, answer: dict[str, Any]) -> None:
        """Append one case's answer and flush it to disk."""
        with (self.directory / ANSWERS).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"id": case_id, "answer": answer}, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.answered[case_id] = answer


def unfinished_runs(home: Path) -> list[Path]:
    """The directories of unfinished answer runs, most recently started first."""
    root = home / "evaluations"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if (p / PENDING).is_file() and not (p / "run.json").exists()]
    return sorted(found, key=lambda p: p.name, reverse=True)


def _unfinished(reference: str, home: Path) -> Path:
    if reference == "latest":
        runs = unfinished_runs(home)
        if not runs:
            raise EvaluationError(f"no unfinished evaluation run under {home / 'evaluations'}")
        return runs[0]
    for directory in (home / "evaluations" / reference, Path(reference)):
        if (directory / PENDING).is_file():
            return directory
        if (directory / "run.json").is_file():
            raise EvaluationError(f"evaluation run {reference!r} is finished: nothing to resume")
    raise EvaluationError(
        f"no unfinished evaluation run {reference!r} under {home / 'evaluations'}"
    )


def _differences(
    recorded: dict[str, Any], now: dict[str, Any], prefix: str, ignored: frozenset[str]
) -> list[str]:
    """``key: recorded → now`` for every key whose value differs, nested keys dotted."""
    found = []
    for key in sorted((set(recorded) | set(now)) - ignored):
        before, after = recorded.get(key), now.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            found += _differences(before, after, f"{prefix}{key}.", frozenset())
        elif _comparable(before) != _comparable(after):
            found.append(f"{prefix}{key}: {_shown(before)} → {_shown(after)}")
    return found


def _comparable(value: Any) -> str:
    """A value as JSON (tuples and lists alike, keys in order)."""
    return json.dumps(value, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    return "(none)" if value is None else _comparable(value)

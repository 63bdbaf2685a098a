"""Docs cannot drift from the CLI: every option in --help appears in docs/cli.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import ragwright
from tests.conftest import REPO


@pytest.mark.parametrize(
    "command",
    [
        "chunks",
        "ingest",
        "status",
        "verify",
        "search",
        "ask",
        "eval run",
        "eval calibrate",
        "eval compare",
        "eval report",
        "keys add",
        "keys list",
        "keys revoke",
        "serve",
        "worker",
        "ingest-worker",
        "model status",
        "model stop",
    ],
)
def test_every_option_is_documented(command: str, tmp_path: Path) -> None:
    env = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    result = ragwright(*command.split(), "--help", home=tmp_path, check=True, **env)
    options = set(re.findall(r"--[a-z][a-z-]+", result.stdout))
    assert options, result.stdout
    documented = (REPO / "docs" / "cli.md").read_text()
    section = documented.split(f"## ragwright {command}\n", 1)[1].split("\n## ", 1)[0]
    missing = sorted(o for o in options if o not in section)
    assert not missing, f"docs/cli.md lacks {missing} for `{command}`: regenerate it"


def test_readme_starts_with_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    assert block.splitlines()[0].startswith("make demo")
    assert block.splitlines()[1].startswith("make test")


def test_every_setting_is_documented() -> None:
    from ragwright.settings.flat import FLAT, env_name

    documented = (REPO / "docs" / "configuration.md").read_text()
    missing = [name for name in FLAT if f"`{env_name(name)}`" not in documented]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_the_settings_tables_are_generated_from_the_models() -> None:
    from ragwright.settings.doc import render

    committed = (REPO / "docs" / "configuration.md").read_text()
    assert render(committed) == committed, (
        "docs/configuration.md differs from the settings models: "
        "run python -m ragwright.settings.doc"
    )

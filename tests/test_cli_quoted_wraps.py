"""A quoted answer from hard-wrapped Markdown through ``ragwright ingest`` and ``ask``
with the local model: the fact that sits across a line break is quoted whole, and no
Markdown syntax (a heading's ``###``, emphasis, a link's address) reaches the reader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import ragwright

# Wrapped at 72 columns as the operator manual it comes from: the answer to the first
# question is the sentence cut after "set to", the second's follows a "###" heading.
GIT_CONFIGURATION = """\
---
title: Git configuration
document_type: runbook
publication_state: published
---
# Git configuration

## System configuration

Argo CD runs Git with the `HOME` environment variable set to
`/dev/null`. As a result, global Git configuration is not supported.
Use the *system* configuration file instead, as described in
[the Git documentation](https://git-scm.com/docs/git-config).

### Disable admin user

Once you create other users, you may want to disable the admin user.
Set `admin.enabled` to `false` in the
`argocd-cm` ConfigMap.
"""


@pytest.fixture
def wrapped_home(tmp_path: Path) -> Iterator[Path]:
    from ragwright.adapters.chatmodels.resident import stop_resident

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "git.md").write_text(GIT_CONFIGURATION, "utf-8")
    home = tmp_path / "home"
    ragwright("ingest", str(docs), home=home, check=True)
    yield home
    stop_resident(home / "models")


def ask(question: str, home: Path) -> dict[str, Any]:
    # A threshold below any on-topic sentence: past the gate the model only selects.
    result = ragwright(
        "ask", question, "--json", home=home, check=True, RAGWRIGHT_ANSWERABILITY_THRESHOLD="0.1"
    )
    out: dict[str, Any] = json.loads(result.stdout)
    return out


@pytest.mark.slow
def test_a_quoted_answer_keeps_the_fact_at_a_line_break_and_no_markdown(
    wrapped_home: Path,
) -> None:
    home_is = ask(
        "What is the HOME environment variable set to when Argo CD runs Git?", wrapped_home
    )
    assert home_is["status"] == "answered" and home_is["style"] == "quoted"
    fact = "Argo CD runs Git with the `HOME` environment variable set to `/dev/null`."
    assert fact in home_is["answer"]
    disable = ask("How do I disable the admin user?", wrapped_home)
    assert disable["status"] == "answered"
    quoted = [q["text"] for q in disable["quotes"]]
    assert "Set `admin.enabled` to `false` in the `argocd-cm` ConfigMap." in quoted
    for result in (home_is, disable):
        text = result["answer"]
        assert text == " ".join(q["text"] for q in result["quotes"])
        assert not any(syntax in text for syntax in ("#", "*system*", "](", "\n"))

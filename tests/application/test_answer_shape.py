"""The JSON form of an answer keeps its keys, in their order (issue 21).

``options`` and ``provenance`` are typed records now; their JSON form must stay the
documented one (docs/application.md, the HTTP contract, ``ask --json``). The lists below
were taken from the result before the records were typed: the order is pinned too, as
``ask --json`` prints the keys in it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragwright.application import AnswerRequest, IngestRequest
from ragwright.errors import FailureCategory
from ragwright.testing.scripted import Fail, ScriptedChatModel
from tests.application.components import fake_application
from tests.conftest import SAMPLES

QUESTION = "Should I drain all queued work during shutdown?"

TOP = [
    "mode",
    "reason",
    "status",
    "style",
    "answer",
    "withheld_answer",
    "quotes",
    "answerability",
    "degraded",
    "citations",
    "sources",
    "decisions",
    "policy",
    "input_tokens",
    "history",
    "request",
    "usage",
    "provider",
    "model",
    "fallback",
    "support",
    "options",
    "timings",
    "template",
    "provenance",
    "draft",
    "chunking_version_source",
    "searched",
    "excluded_versions",
    "excluded_types",
    "excluded_states",
]
OPTIONS = [
    "k",
    "mode",
    "policy",
    "schema_style",
    "temperature",
    "budget",
    "thresholds",
    "support_check",
    "style",
    "chunking_version",
    "document_types",
    "publication_states",
    "documents",
    "tenant",
    "history_messages",
    "current_revisions",
    "deadline_seconds",
    "answerability_threshold",
    "answerability_source",
    "primary",
    "fallbacks",
    "thresholds_source",
    "thresholds_sources",
    "calibration",
]
BUDGET = ["window", "output_reserve", "framing_reserve", "max_input_tokens"]
PROVENANCE = [
    "provider",
    "model",
    "fallback",
    "instructions_version",
    "assembly_policy",
    "chunking_version",
    "index_contract",
]
INDEX_CONTRACT = ["embedding_profile", "embedding_digest", "lexical_profile"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    app, _ = fake_application(home)
    app.ingest(IngestRequest(sources=(SAMPLES,)))
    return home


def _answer(home: Path, request: AnswerRequest, **kwargs: Any) -> dict[str, Any]:
    app, _ = fake_application(home, **kwargs)
    body = asyncio.run(app.answer(request)).to_dict()
    assert json.loads(json.dumps(body)) == body  # plain JSON, nothing typed left over
    return body


@pytest.mark.parametrize(
    ("name", "request_", "kwargs"),
    [
        ("generated", AnswerRequest(QUESTION), {}),
        ("preview", AnswerRequest(QUESTION, preview=True), {}),
        (
            "degraded",
            AnswerRequest(QUESTION),
            {"model": ScriptedChatModel([Fail(FailureCategory.TRANSIENT)] * 10)},
        ),
    ],
)
def test_the_answer_json_keeps_its_keys_in_order(
    home: Path, name: str, request_: AnswerRequest, kwargs: dict[str, Any]
) -> None:
    body = _answer(home, request_, **kwargs)
    assert list(body) == TOP
    assert list(body["options"]) == OPTIONS
    assert list(body["options"]["budget"]) == BUDGET
    assert list(body["provenance"]) == PROVENANCE
    assert list(body["provenance"]["index_contract"]) == INDEX_CONTRACT


def test_the_request_options_and_provenance_carry_the_request(home: Path) -> None:
    request = AnswerRequest(
        QUESTION, k=3, policy="seed-baseline", current_revisions={"worker-shutdown": "r1"}
    )
    body = _answer(home, request)
    options, provenance = body["options"], body["provenance"]
    assert (options["k"], options["policy"], options["current_revisions"]) == (
        3,
        "seed-baseline",
        {"worker-shutdown": "r1"},
    )
    assert options["documents"] == [] and options["fallbacks"] == []
    assert options["thresholds_source"] == "none"
    assert provenance["assembly_policy"] == body["policy"]
    assert provenance["instructions_version"] == body["request"]["prompt_version"]
    assert provenance["chunking_version"] == options["chunking_version"]

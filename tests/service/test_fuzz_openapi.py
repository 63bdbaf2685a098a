"""Property-based fuzzing of the OpenAPI contract: every operation the service publishes,
with schema-valid and schema-breaking requests (schemathesis) and with every kind of
caller (keys of each scope, an allowlisted key, a revoked key, a garbage key, none).

Whatever arrives, the service never fails with 500, and every error it returns is
problem details (RFC 9457) whose ``status`` is the HTTP status and whose kind is in
docs/service.md's problem table with that status; a stream always ends with its
``outcome``. The service runs on a real loopback socket (uvicorn, lifespan included) over
the real index with the hashing embedder and a scripted model that never runs out.

Bounded and repeatable for CI: a fixed number of examples per operation and mode,
derandomized, no example database, no per-example deadline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from ragwright.application import RevokeKeyRequest
from ragwright.testing.scripted import ScriptedChatModel
from tests.application.components import answered
from tests.service.conftest import LiveServer, Service, build_service

PROBLEM = "application/problem+json"
SERVICE_DOCS = Path(__file__).resolve().parents[2] / "docs" / "service.md"
EXAMPLES = 50
POSITIVE = (GenerationMode.POSITIVE,)
BOTH = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)

# Every operation of /openapi.json and the modes it is fuzzed in; a test below fails when
# the schema gains an operation this table does not name. The probes take no input, so
# there is nothing schema-breaking to send them (schemathesis cannot negate an empty
# request); they still meet every kind of caller.
OPERATIONS: dict[tuple[str, str], tuple[GenerationMode, ...]] = {
    ("GET", "/healthz"): POSITIVE,
    ("GET", "/readyz"): POSITIVE,
    ("POST", "/v1/answers"): BOTH,
    ("POST", "/v1/answers/stream"): BOTH,
    ("POST", "/v1/search"): BOTH,
    ("GET", "/v1/status"): BOTH,
    ("POST", "/v1/answer-jobs"): BOTH,
    ("GET", "/v1/answer-jobs/{job_id}"): BOTH,
    ("DELETE", "/v1/answer-jobs/{job_id}"): BOTH,
    # Last: an ingestion (with ``prune``) may replace the corpus the others answer from.
    ("POST", "/v1/ingestions/files"): BOTH,
    ("POST", "/v1/ingestions"): BOTH,
}

# Who calls: mostly a key that may do everything (so requests reach the use cases), and
# each way of being refused. Hypothesis shrinks toward the first.
CALLERS = ("admin",) * 4 + ("answer", "search-allowlisted", "revoked", "garbage", "none")


def documented_problems() -> set[tuple[str, int]]:
    """(type, status) of every row of the problem table in docs/service.md: a kind the
    service returns must be documented there, with that status."""
    table = SERVICE_DOCS.read_text().split("| kind | status | when |", 1)[1].split("\n\n", 1)[0]
    documented = set()
    for row in table.splitlines()[2:]:
        kinds_cell, statuses_cell = row.split("|")[1:3]
        kinds = re.findall(r"`([a-z0-9-]+)`", kinds_cell)
        statuses = [int(s) for s in re.findall(r"\d{3}", statuses_cell)]
        if len(statuses) == 1:
            statuses *= len(kinds)
        documented |= {
            (f"/problems/{kind}", status) for kind, status in zip(kinds, statuses, strict=True)
        }
    return documented


DOCUMENTED = documented_problems()
# Text the document rules refuse though the schema allows it (control characters,
# blank after stripping); see within_core_rules.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def within_core_rules(case: Any) -> Any:
    """A schema-valid ingestion made valid under the document rules too (ids, a known
    type and state, text without control characters), keeping the fuzzed text: the
    schema is looser than those rules, so nearly every raw case is refused with 422 and
    without this the fuzzer would never reach the ingestion itself."""

    def text(value: str) -> str:
        return CONTROL.sub(" ", value).strip() or "x"

    for i, document in enumerate(case.body["documents"]):
        document.update(
            document_id=f"fuzzed-{i}",
            document_type="runbook",
            publication_state="published",
            title=text(document["title"]),
        )
        if document.get("revision") is not None:
            document["revision"] = text(document["revision"])
        for j, section in enumerate(document["sections"]):
            section.update(
                section_id=f"s{j}",
                heading=text(section["heading"]),
                paragraphs=[text(p) for p in section["paragraphs"]],
            )
    return case


# Questions at the edges the core's rules draw and random text seldom reaches: blank,
# control and separator characters, a byte-order mark, the length limit, too many tokens.
EDGE_QUESTIONS = (" ", "\t\r\n", "\x00", "\u2028", "\ufeff?", "é" * 2000, "a " * 1000)


def with_question(case: Any, question: str) -> Any:
    """The case with an edge question in place of the generated one."""
    case.body["question"] = question
    return case


@dataclass(frozen=True)
class Target:
    """The running service, its schema and a secret per kind of caller."""

    service: Service
    url: str
    schema: Any
    secrets: dict[str, str]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    service = build_service(
        tmp_path_factory.mktemp("fuzz") / "home",
        ScriptedChatModel([answered("S1")] * 10_000),
        # A fifth of the callers send a wrong key, all from one address: at the default
        # every caller would soon wait (429) and the cases reach no use case. The
        # throttle has its own tests (tests/service/test_throttling.py).
        serve_auth_failures=1_000_000,
    )
    secrets = {
        "admin": service.key("admin", scopes=("admin",)),
        "answer": service.key("answer", scopes=("answer",)),
        "search-allowlisted": service.key(
            "allowlisted", scopes=("search", "ingest"), documents=("worker-shutdown",)
        ),
        "revoked": service.key("revoked", scopes=("admin",)),
        "garbage": "rwk_not-a-key",
    }
    revoked = next(k for k in service.application.list_keys().keys if k.name == "revoked")
    service.application.revoke_key(RevokeKeyRequest(revoked.id))
    with LiveServer(service.app) as url:
        yield Target(service, url, schemathesis.openapi.from_url(url + "/openapi.json"), secrets)


def test_the_fuzz_table_names_every_operation_of_the_schema(target: Target) -> None:
    published = {
        (result.ok().method.upper(), result.ok().path)
        for result in target.schema.get_all_operations()
    }
    assert published == set(OPERATIONS)


def fuzz_cases() -> list[tuple[str, str, GenerationMode]]:
    return [(method, path, mode) for (method, path), modes in OPERATIONS.items() for mode in modes]


@pytest.mark.parametrize(("method", "path", "mode"), fuzz_cases())
def test_fuzzed_requests_never_fail_with_500_and_every_error_is_a_problem(
    target: Target, method: str, path: str, mode: GenerationMode
) -> None:
    operation = target.schema[path][method]
    cases = operation.as_strategy(mode)
    if mode is GenerationMode.POSITIVE and path == "/v1/ingestions":
        cases = st.one_of(cases, cases.map(within_core_rules))
    elif mode is GenerationMode.POSITIVE and method == "POST" and path != "/v1/ingestions/files":
        cases = st.one_of(cases, st.builds(with_question, cases, st.sampled_from(EDGE_QUESTIONS)))
    session = requests.Session()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
    @given(case=cases, caller=st.sampled_from(CALLERS))
    def fuzz(case: Any, caller: str) -> None:
        # The caller replaces whatever bearer token the schema's security scheme made up
        # (a schema-breaking case that drops the header still drops it).
        case.headers = {
            name: value
            for name, value in (case.headers or {}).items()
            if name.lower() != "authorization"
        }
        headers = {} if caller == "none" else {"Authorization": f"Bearer {target.secrets[caller]}"}
        response = case.call(base_url=target.url, headers=headers, session=session)
        check_response(response.status_code, response.headers, response.content)

    fuzz()


def check_response(status: int, headers: dict[str, list[str]], content: bytes) -> None:
    """The contract every response keeps, whatever the request."""
    assert status != 500, content[:500]
    content_type = headers.get("content-type", [""])[0]
    if status >= 400:
        assert content_type == PROBLEM, (status, content_type, content[:500])
        body = json.loads(content)
        assert {"type", "title", "status", "detail"} <= set(body), body
        assert body["status"] == status, body
        assert (body["type"], status) in DOCUMENTED, body
        if status == 401:
            assert headers["www-authenticate"][0].startswith('Bearer realm="ragwright"')
    elif content_type.startswith("text/event-stream"):
        # A committed stream always ends with its outcome, never a silent cut.
        names = [line[7:] for line in content.decode().splitlines() if line.startswith("event: ")]
        assert names and names[-1] == "outcome", names
    else:
        assert content_type == "application/json", (status, content_type)

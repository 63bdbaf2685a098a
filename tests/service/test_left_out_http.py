"""Through HTTP (issue 24 item 7): a key's queries read the chunking version the index
holds for it, and what the result says was left out stays inside the key's grant: a key
limited to runbooks is not told that notes exist, a key allowlisted to one document is
told nothing of another document's chunks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from ragwright.application import ChunkingOptions, EvidenceFilter, IngestRequest, SearchRequest
from tests.service.conftest import CORPUS, QUESTION, Service, bearer
from tests.service.test_http_contract import events_of

Client = Callable[[Service], TestClient]
BLOCKS = "sentence-blocks-400w-overlap1-v1"
OPERATOR = EvidenceFilter(also_visible_types=None, also_visible_states=None)


def _blocks_service(make_service: Callable[..., Service]) -> Service:
    service = make_service(ingest=False)
    service.application.ingest(
        IngestRequest((CORPUS,), chunking=ChunkingOptions(policy="sentence-blocks", max_words=400))
    )
    return service


def _post(client: TestClient, path: str, secret: str, **body: Any) -> dict[str, Any]:
    response = client.post(path, json={"question": QUESTION, **body}, headers=bearer(secret))
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_http_queries_read_the_version_the_index_holds(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = _blocks_service(make_service)
    secret = service.key("runbooks", scopes=("search", "answer"), types=("runbook",))
    client = client_for(service)
    found = _post(client, "/v1/search", secret)
    assert found["hits"] and {h["chunking_version"] for h in found["hits"]} == {BLOCKS}
    assert (found["chunking_version"], found["chunking_version_source"]) == (BLOCKS, "index")
    answer = _post(client, "/v1/answers", secret)
    assert answer["status"] == "answered" and answer["citations"]
    assert answer["options"]["chunking_version"] == BLOCKS
    assert answer["chunking_version_source"] == "index"


def test_what_a_key_is_told_was_left_out_stays_inside_its_grant(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = _blocks_service(make_service)
    # The index holds notes and drafts: the operator is told of them.
    operator = service.application.search(SearchRequest(QUESTION, evidence=OPERATOR))
    assert operator.excluded_types["note"] > 0 and operator.excluded_states["draft"] > 0
    client = client_for(service)
    # A key made without types or states reads published runbooks: that is its grant.
    plain = service.key("plain", scopes=("search", "answer"))
    runbooks = service.key("runbooks", scopes=("search", "answer"), types=("runbook",))
    narrow = service.key("narrow", scopes=("search", "answer"), documents=("worker-shutdown",))
    for secret in (plain, runbooks, narrow):
        for path in ("/v1/search", "/v1/answers"):
            body = _post(client, path, secret)
            assert (body["excluded_types"], body["excluded_states"]) == ({}, {}), path
            assert body["excluded_versions"] == {}
    narrowed = _post(client, "/v1/search", narrow)
    assert {h["document_id"] for h in narrowed["hits"]} == {"worker-shutdown"}


def test_a_keys_answers_say_which_types_and_states_were_searched_and_why(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    """Issue 47 item 3: what was searched is named whatever the index holds, the defaults
    told apart from the key's grant."""
    service = make_service()
    client = client_for(service)
    scopes = ("search", "answer")
    expected = {
        service.key("plain", scopes=scopes): (
            ["runbook"], "default", ["published"], "default",
            "searched published runbook documents (the default eligibility); draft "
            "documents and documents of other types were not searched",
        ),
        service.key("notes", scopes=scopes, types=("runbook", "note")): (
            ["runbook", "note"], "key", ["published"], "default",
            "searched published runbook and note documents (types from this key's grant, "
            "state by default); draft documents and documents of other types were not "
            "searched",
        ),
        service.key("all", scopes=scopes, types=("note",), states=("published", "draft")): (
            ["note"], "key", ["published", "draft"], "key",
            "searched published and draft note documents (this key's grant); documents "
            "of other types were not searched",
        ),
    }  # fmt: skip
    for secret, (types, types_source, states, states_source, note) in expected.items():
        searched = {
            "types": types,
            "types_source": types_source,
            "states": states,
            "states_source": states_source,
            "note": note,
        }
        for path in ("/v1/search", "/v1/answers"):
            assert _post(client, path, secret)["searched"] == searched, (path, note)
        streamed = client.post(
            "/v1/answers/stream", json={"question": QUESTION}, headers=bearer(secret)
        )
        assert streamed.status_code == 200, streamed.text
        assert events_of(streamed.text)[-1][1]["searched"] == searched

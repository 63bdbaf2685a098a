"""A key's grant bounds what ``POST /v1/ingestions`` writes, replaces and prunes, and
the summary reveals nothing about documents outside it (issue 20, items 2 and 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from ragwright.application import IngestRequest, StatusRequest
from ragwright.service.client import document_body
from tests.service.conftest import CORPUS, Service, bearer

Client = Callable[[Service], TestClient]


def note(document_id: str, state: str, document_type: str = "note") -> dict[str, Any]:
    return {
        "document_id": document_id,
        "title": f"Note {document_id}",
        "document_type": document_type,
        "publication_state": state,
        "sections": [
            {"section_id": "body", "heading": "Body", "paragraphs": ["Drain the queue first."]}
        ],
    }


def stored(service: Service) -> dict[str, tuple[str, str]]:
    """Every stored document id of the untenanted corpus: (type, state)."""
    return {
        d.document_id: (d.document_type, d.publication_state)
        for d in service.application.status(StatusRequest()).documents
    }


def test_an_allowlisted_key_prunes_nothing_outside_its_allowlist(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service()  # the sample corpus: 10 documents
    before = stored(service)
    one = service.key("one", scopes=("ingest",), documents=("refund-policy",))
    loaded = service.application.load_documents(IngestRequest((CORPUS,)))
    body = next(document_body(d) for d in loaded.documents if d.document_id == "refund-policy")
    response = client_for(service).post(
        "/v1/ingestions", json={"documents": [body], "prune": True}, headers=bearer(one)
    )
    assert response.status_code == 200, response.text
    assert response.json()["documents_pruned"] == 0
    assert stored(service) == before


def test_a_type_and_state_limited_key_writes_and_prunes_only_within_them(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service()
    before = stored(service)
    drafts = service.key("drafts", scopes=("ingest",), types=("note",), states=("draft",))
    client = client_for(service)

    def send(*documents: dict[str, Any], prune: bool = True) -> Any:
        return client.post(
            "/v1/ingestions",
            json={"documents": list(documents), "prune": prune},
            headers=bearer(drafts),
        )

    # Publishing is outside a draft-only grant: refused, nothing written or pruned.
    published = send(note("fine-draft", "draft"), note("new-note", "published"))
    assert published.status_code == 403, published.text
    problem = published.json()
    assert problem["type"] == "/problems/outside-grant"
    assert problem["detail"].startswith("documents[1].publication_state: 'published'")
    assert problem["allowed"] == ["draft"]
    assert stored(service) == before
    # A runbook is outside a note-only grant.
    runbook = send(note("new-runbook", "draft", "runbook"))
    assert runbook.status_code == 403
    assert runbook.json()["detail"].startswith("documents[0].document_type: 'runbook'")
    assert stored(service) == before
    # Writing over a stored published runbook would change it: refused.
    over = send(note("worker-shutdown", "draft"), prune=False)
    assert over.status_code == 403, over.text
    assert over.json()["detail"].startswith("documents[0]: the stored document")
    assert stored(service) == before
    # Within the grant: written; the prune leaves every runbook and published note.
    written = send(note("new-note", "draft"))
    assert written.status_code == 200, written.text
    assert written.json()["documents_pruned"] == 0
    assert stored(service) == {**before, "new-note": ("note", "draft")}
    # The prune still deletes what is within the grant and missing from the request.
    again = send(note("second-note", "draft"))
    assert again.status_code == 200, again.text
    assert again.json()["documents_pruned"] == 1
    assert stored(service) == {**before, "second-note": ("note", "draft")}


def test_an_ingestion_summary_reveals_no_other_tenant(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    acme = service.key("acme", tenant="acme", scopes=("ingest",))
    globex = service.key("globex", tenant="globex", scopes=("ingest",))
    client = client_for(service)
    hidden = note("acme-hidden", "published")
    first = client.post("/v1/ingestions", json={"documents": [hidden]}, headers=bearer(acme))
    assert first.status_code == 200, first.text
    probe = {**hidden, "document_id": "acme-hidden"}
    second = client.post("/v1/ingestions", json={"documents": [probe]}, headers=bearer(globex))
    assert second.status_code == 200, second.text
    assert "acme" not in second.text
    assert "shared_ids" not in second.json()
    assert second.json()["tenants"] == ["globex"]

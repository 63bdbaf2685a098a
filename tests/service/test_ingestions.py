"""Ingesting through the service while it serves: ``POST /v1/ingestions`` and
``ragwright ingest --server``, with tenant scope on writes and concurrent queries over
real HTTP during a real ingestion."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.application import IngestRequest, StatusRequest
from ragwright.protocols import Embedder
from ragwright.service.client import document_body
from tests.cli import ragwright
from tests.service.conftest import CORPUS, LiveServer, Service, bearer, build_service

Client = Callable[[Service], TestClient]
DOCUMENTS = 30


def write_corpus(root: Path, marker: str) -> Path:
    """``DOCUMENTS`` runbooks of three sections; every paragraph names its document and
    carries ``marker`` (the revision a hit came from)."""
    root.mkdir(parents=True, exist_ok=True)
    for number in range(DOCUMENTS):
        sections = "\n\n".join(
            f"## {name}\n\nFor service{number:02d} {marker}: {name.lower()} the worker queue "
            f"and check the deadline before the restart of service{number:02d}."
            for name in ("Drain", "Restart", "Verify")
        )
        (root / f"service{number:02d}.md").write_text(
            f"---\ndocument_id: service{number:02d}\ndocument_type: runbook\n"
            "publication_state: published\n---\n"
            f"# Service {number:02d} operations\n\n{sections}\n"
        )
    return root


def test_ingest_server_sends_the_documents_and_the_service_indexes_them(
    make_service: Callable[..., Service], tmp_path: Path
) -> None:
    service = make_service(ingest=False)
    secret = service.key("writer", scopes=("ingest", "search"))
    with LiveServer(service.app) as url:
        result = ragwright(
            "ingest",
            str(CORPUS),
            "--server",
            url,
            "--json",
            home=tmp_path / "client",
            RAGWRIGHT_API_KEY=secret,
        )
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        search = httpx.post(
            url + "/v1/search", json={"question": "drain queued work"}, headers=bearer(secret)
        )
        text = ragwright(
            "ingest",
            str(CORPUS),
            "--server",
            url,
            home=tmp_path / "client",
            RAGWRIGHT_API_KEY=secret,
        )
    assert summary["documents"] == len(list(CORPUS.glob("*.md")))
    assert summary["embedded"] == summary["chunks"] > 0
    assert search.status_code == 200 and search.json()["hits"]
    assert "0 embedded" in text.stdout and f"(through {url})" in text.stdout
    # The collection's BM25 figures count other tenants' chunks: not the caller's to see.
    assert "bm25_avgdl" not in summary and "BM25" not in text.stdout
    # The client never opened an index of its own: the service's process holds it.
    assert not (tmp_path / "client" / "index").exists()


def test_ingest_server_needs_the_ingest_scope_and_refuses_what_the_service_decides(
    make_service: Callable[..., Service], tmp_path: Path
) -> None:
    service = make_service(ingest=False)
    reader = service.key("reader", scopes=("search",))
    writer = service.key("writer", scopes=("ingest",))
    with LiveServer(service.app) as url:
        forbidden = ragwright(
            "ingest", str(CORPUS), "--server", url, home=tmp_path, RAGWRIGHT_API_KEY=reader
        )
        tenant = ragwright(
            "ingest",
            str(CORPUS),
            "--server",
            url,
            "--tenant",
            "acme",
            home=tmp_path,
            RAGWRIGHT_API_KEY=writer,
        )
        no_key = ragwright("ingest", str(CORPUS), "--server", url, home=tmp_path)
    assert forbidden.returncode == 1
    assert "answered 403" in forbidden.stderr and "'ingest' scope" in forbidden.stderr
    assert len(forbidden.stderr.strip().splitlines()) == 1
    assert tenant.returncode == 2 and "--tenant cannot be used with --server" in tenant.stderr
    assert no_key.returncode == 2 and "RAGWRIGHT_API_KEY" in no_key.stderr
    assert service.application.index_state().error == "IndexNotFound"  # nothing written


def test_ingest_server_names_the_file_the_service_refused(
    make_service: Callable[..., Service], tmp_path: Path
) -> None:
    """A Markdown file the server's run refuses (a heading over the policy's word
    budget): one line naming the request field, the document and its file; exit 1."""
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    corpus = write_corpus(tmp_path / "corpus", "r1")
    (corpus / "long.md").write_text(
        "---\ndocument_id: long\ndocument_type: runbook\npublication_state: published\n"
        "---\n# Long\n\n## " + " ".join(["w"] * 90) + "\n\nSteps.\n"
    )
    with LiveServer(service.app) as url:
        result = ragwright(
            "ingest", str(corpus), "--server", url, home=tmp_path / "c", RAGWRIGHT_API_KEY=writer
        )
    assert result.returncode == 1, result.stderr
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "answered 422" in message and "the heading alone has 90 words" in message, message
    assert "document 'long'" in message and "long.md" in message, message
    assert service.application.index_state().points == 0  # the other 30 not written either


def test_an_ingestion_writes_and_prunes_only_the_keys_tenant(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Path
) -> None:
    service = make_service()  # the sample corpus, untenanted
    acme = service.key("acme", tenant="acme", scopes=("ingest",))
    loaded = service.application.load_documents(IngestRequest((CORPUS,)))
    one = [document_body(loaded.documents[0])]
    client = client_for(service)
    response = client.post(
        "/v1/ingestions", json={"documents": one, "prune": True}, headers=bearer(acme)
    )
    assert response.status_code == 200, response.text
    assert response.json()["tenants"] == ["acme"]
    status = service.application.status(StatusRequest())
    untenanted = [d for d in status.documents if d.tenant is None]
    assert len(untenanted) == len(loaded.documents)  # the prune never reached them
    assert [d.document_id for d in status.documents if d.tenant == "acme"] == [
        loaded.documents[0].document_id
    ]


def test_an_ingestion_outside_the_keys_allowlist_or_invalid_is_refused_with_nothing_written(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    narrow = service.key("narrow", scopes=("ingest",), documents=("only-this",))
    writer = service.key("writer", scopes=("ingest",))
    loaded = service.application.load_documents(IngestRequest((CORPUS,)))
    body = document_body(loaded.documents[0])
    client = client_for(service)
    outside = client.post("/v1/ingestions", json={"documents": [body]}, headers=bearer(narrow))
    assert outside.status_code == 403
    assert outside.json()["detail"].startswith("documents[0].document_id")
    bad = {**body, "publication_state": "secret"}
    invalid = client.post("/v1/ingestions", json={"documents": [bad]}, headers=bearer(writer))
    assert invalid.status_code == 422
    assert invalid.json()["errors"][0]["field"] == "documents[0].publication_state"
    assert service.application.index_state().error == "IndexNotFound"


def _section(paragraph: str) -> dict[str, Any]:
    return {"section_id": "body", "heading": "Body", "paragraphs": [paragraph]}


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        # The same new document twice: refused where it repeats.
        ("duplicate", "documents[2].document_id", "duplicate document id"),
        # A heading over the chunking policy's 80 words (a long paragraph is split).
        ("oversize", "documents[1].sections[0]", "the heading alone has 120 words"),
        # A heading within the word budget but alone over the profile's 512 tokens.
        ("too-many-tokens", "documents[1].sections[0]", "tokens as embedded"),
    ],
)
def test_a_document_the_run_refuses_is_422_naming_it_and_nothing_is_written(
    make_service: Callable[..., Service],
    client_for: Client,
    change: str,
    field: str,
    rule: str,
) -> None:
    """What the run's validation pass refuses (a duplicate id, a paragraph the policy
    cannot chunk, an input over the model's token limit) is the caller's input, not an
    index outage: 422 naming the document's place in the request, with the valid
    documents of the same request not written either."""
    service = make_service()
    writer = service.key("writer", scopes=("ingest",))
    before = service.application.status(StatusRequest()).documents
    fine = {
        "document_id": "fine",
        "title": "A fine note",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [_section("Drain the queue before the restart.")],
    }
    bad = {**fine, "document_id": "bad"}
    if change == "duplicate":
        documents = [fine, bad, {**bad, "title": "Again"}]
    elif change == "oversize":
        heading = " ".join(["drain"] * 120)
        documents = [fine, {**bad, "sections": [{**_section("Text."), "heading": heading}]}]
    else:
        heading = " ".join(["a-b-c-d"] * 76)
        documents = [fine, {**bad, "sections": [{**_section("Text."), "heading": heading}]}]
    response = client_for(service).post(
        "/v1/ingestions", json={"documents": documents}, headers=bearer(writer)
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["errors"][0]["field"] == field, problem
    assert rule in problem["errors"][0]["rule"], problem
    assert service.application.status(StatusRequest()).documents == before


class SlowEmbedder:
    """Delegates to the hashing embedder, sleeping per embedding call (one batch), so an ingestion
    lasts long enough for queries to overlap it."""

    def __init__(self, inner: Embedder, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.profile = inner.profile

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(self.delay)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_queries_during_an_http_ingestion_never_fail_and_never_mix_revisions(
    make_service: Callable[..., Service], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = make_service(ingest=False, batch_size=4)
    service.application.ingest(IngestRequest((write_corpus(tmp_path / "a", "rev-a"),)))
    service.components._hashing = SlowEmbedder(service.components._hashing, 0.02)  # type: ignore[assignment]
    # Each document's switch (one set_payload of its document fields) takes 20 ms, so
    # the switches of the 30 documents span 0.6 s: queries land between them however
    # busy the machine is, and see switched documents new and the others old.
    switch = EdgeIndex.set_payload

    def slow_switch(index: EdgeIndex, ids: Any, payload: Any) -> None:
        if "revision" in payload:
            time.sleep(0.02)
        switch(index, ids, payload)

    monkeypatch.setattr(EdgeIndex, "set_payload", slow_switch)
    secret = service.key("ops", scopes=("ingest", "search"))
    revised = service.application.load_documents(
        IngestRequest((write_corpus(tmp_path / "b", "rev-b"),))
    )
    body = {"documents": [document_body(d) for d in revised.documents]}
    responses: list[dict[str, Any]] = []
    failures: list[str] = []
    during = threading.Event()
    done = threading.Event()

    def read(url: str) -> None:
        with httpx.Client(base_url=url, headers=bearer(secret), timeout=30) as client:
            while not done.is_set():
                response = client.post(
                    "/v1/search", json={"question": "drain the worker queue deadline", "k": 20}
                )
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text[:200]}")
                    continue
                if during.is_set():
                    responses.append(response.json())

    with LiveServer(service.app) as url:
        readers = [threading.Thread(target=read, args=(url,)) for _ in range(3)]
        for reader in readers:
            reader.start()
        during.set()
        ingestion = httpx.post(
            url + "/v1/ingestions", json=body, headers=bearer(secret), timeout=120
        )
        during.clear()
        done.set()
        for reader in readers:
            reader.join(30)
        after = httpx.post(
            url + "/v1/search",
            json={"question": "drain the worker queue deadline", "k": 20},
            headers=bearer(secret),
        ).json()
    assert ingestion.status_code == 200, ingestion.text
    assert ingestion.json()["embedded"] > 0
    assert failures == []
    assert len(responses) >= 10  # the readers really overlapped the ingestion
    seen: set[str] = set()
    for response in responses:
        markers: dict[str, set[str]] = defaultdict(set)
        for hit in response["hits"]:
            markers[hit["document_id"]].add("rev-b" if "rev-b" in hit["text"] else "rev-a")
        for document, found in markers.items():
            assert len(found) == 1, f"{document} mixed revisions in one response: {found}"
            seen |= found
    assert seen == {"rev-a", "rev-b"}  # queries saw the old and the new revisions
    assert all("rev-b" in hit["text"] for hit in after["hits"])


ACME_RUNBOOK = (
    "---\ndocument_id: payments\ndocument_type: runbook\npublication_state: published\n---\n"
    "# Acme payments operations\n\n"
    + "\n\n".join(
        f"## {step}\n\nBefore you {step.lower()} the payment workers, drain the settlement "
        "queue, confirm the ledger reconciliation finished, page the on-call treasurer and "
        "record the batch identifiers in the incident channel with the operator's initials."
        for step in ("Stop", "Patch", "Restart", "Verify")
    )
    + "\n"
)
GLOBEX_NOTE = (
    "---\ndocument_id: vpn\ndocument_type: note\npublication_state: published\n---\n"
    "# Globex VPN\n\n## Connect\n\nSign in.\n"
)


def ingest_globex_note(service: Service, route: str, folder: Path) -> dict[str, Any]:
    """Globex's one note through ``route``, by a globex ingest key: the summary."""
    globex = service.key("globex", tenant="globex", scopes=("ingest",))
    client = TestClient(service.app, raise_server_exceptions=False)
    with client:
        if route == "/v1/ingestions/files":
            response = client.post(
                route,
                files=[("files", ("vpn.md", GLOBEX_NOTE.encode()))],
                data={"document_type": "note", "publication_state": "published"},
                headers=bearer(globex),
            )
        else:
            folder.mkdir()
            (folder / "vpn.md").write_text(GLOBEX_NOTE)
            loaded = service.application.load_documents(IngestRequest((folder,)))
            documents = [document_body(d) for d in loaded.documents]
            response = client.post(route, json={"documents": documents}, headers=bearer(globex))
    assert response.status_code == 200, response.text
    summary: dict[str, Any] = response.json()
    return summary


@pytest.mark.parametrize("route", ["/v1/ingestions", "/v1/ingestions/files"])
def test_a_tenants_ingestion_summary_says_nothing_of_what_other_tenants_hold(
    tmp_path: Path, route: str
) -> None:
    """The same globex note gives globex the same summary whether or not acme's runbook
    shares the collection: no collection-wide figure (the BM25 mean; the stored vectors
    re-encoded when globex's short note moved it, acme's among them) tells a tenant what
    others hold or when they ingest (issue 46, item 8)."""
    shared = build_service(tmp_path / "shared", ingest=False)
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "payments.md").write_text(ACME_RUNBOOK)
    shared.application.ingest(IngestRequest((tmp_path / "acme",), tenant="acme"))
    alone = build_service(tmp_path / "alone", ingest=False)
    beside_acme = ingest_globex_note(shared, route, tmp_path / "sent-shared")
    by_itself = ingest_globex_note(alone, route, tmp_path / "sent-alone")
    assert beside_acme == by_itself
    assert (beside_acme["documents"], beside_acme["tenants"]) == (1, ["globex"])
    assert "bm25_avgdl" not in beside_acme and "sparse_reencoded" not in beside_acme

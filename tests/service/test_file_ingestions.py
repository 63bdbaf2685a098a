"""``POST /v1/ingestions/files``: files sent as they are, read like a folder, limited by
the key's grant (tenant, allowlist, types), every unreadable file named."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from ragwright.application import StatusRequest
from ragwright.service import uploads
from tests.adapters.formats.pdf_maker import make_pdf
from tests.conftest import REPO
from tests.service.conftest import Service, bearer

Client = Callable[[Service], TestClient]
MIXED = REPO / "samples" / "mixed"
FORM = {"document_type": "note", "publication_state": "published"}


def mixed_files() -> list[tuple[str, tuple[str, bytes]]]:
    names = sorted(p for p in MIXED.rglob("*") if p.is_file())
    return [("files", (p.relative_to(MIXED).as_posix(), p.read_bytes())) for p in names]


def locked_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(make_pdf([["Secret plan"]]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_files_of_every_format_are_ingested_for_the_keys_tenant_with_page_citations(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    acme = service.key("acme", tenant="acme", scopes=("ingest", "search"))
    client = client_for(service)
    response = client.post(
        "/v1/ingestions/files", files=mixed_files(), data=FORM, headers=bearer(acme)
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["documents"], body["tenants"]) == (5, ["acme"])
    by_source = {m["source"]: m for m in body["metadata"]}
    assert by_source["runbooks/payment-retries.pdf"]["type_from"] == (
        "rule 'runbooks/*' in ragwright-sources.toml"
    )
    assert by_source["vpn-access.txt"]["type_from"] == "document_type"  # the form field
    status = service.application.status(StatusRequest())
    assert {d.tenant for d in status.documents} == {"acme"}
    search = client.post(
        "/v1/search",
        json={"question": "How many times is a failed card payment retried automatically?"},
        headers=bearer(acme),
    )
    assert search.status_code == 200, search.text
    top = search.json()["hits"][0]
    assert (top["document_id"], top["pages"], top["location"]) == (
        "runbooks/payment-retries.pdf",
        [1, 1],
        "runbooks/payment-retries.pdf p. 1",
    )
    assert top["source_uri"] == "runbooks/payment-retries.pdf"  # not the temporary folder


def test_an_unreadable_file_is_named_and_nothing_is_written_unless_skipped(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    client = client_for(service)
    files = [*mixed_files(), ("files", ("locked.pdf", locked_pdf()))]
    refused = client.post("/v1/ingestions/files", files=files, data=FORM, headers=bearer(writer))
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {
            "field": "files[locked.pdf]",
            "rule": "password-protected: save a copy without the password to ingest it",
        }
    ]
    assert service.application.index_state().error == "IndexNotFound"
    skipped = client.post(
        "/v1/ingestions/files",
        files=files,
        data={**FORM, "skip_invalid": "true"},
        headers=bearer(writer),
    )
    assert skipped.status_code == 200, skipped.text
    assert skipped.json()["documents"] == 5
    assert [(s["path"], s["kind"]) for s in skipped.json()["skipped_files"]] == [
        ("locked.pdf", "password_protected")
    ]


def test_the_keys_allowlist_types_and_tenant_limit_what_files_may_write(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    service = make_service(ingest=False)
    client = client_for(service)
    narrow = service.key("narrow", scopes=("ingest",), documents=("vpn-access.txt",))
    outside = client.post(
        "/v1/ingestions/files", files=mixed_files(), data=FORM, headers=bearer(narrow)
    )
    assert outside.status_code == 403
    assert "outside this key's allowlist" in outside.json()["detail"]
    notes_only = service.key("notes", scopes=("ingest",), types=("note",))
    typed = client.post(
        "/v1/ingestions/files", files=mixed_files(), data=FORM, headers=bearer(notes_only)
    )
    assert typed.status_code == 403
    assert "document type 'runbook' is outside this key's types" in typed.json()["detail"]
    acme = service.key("acme", tenant="acme", scopes=("ingest",))
    claims = ("files", ("other.md", b"---\ntenant: globex\n---\n# Other\n\nText.\n"))
    foreign = client.post("/v1/ingestions/files", files=[claims], data=FORM, headers=bearer(acme))
    assert foreign.status_code == 403
    assert "names tenant 'globex'" in foreign.json()["detail"]
    assert service.application.index_state().error == "IndexNotFound"


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd.txt", "a/.hidden.txt"])
def test_a_file_name_that_leaves_the_folder_is_refused(
    make_service: Callable[..., Service], client_for: Client, name: str
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    response = client_for(service).post(
        "/v1/ingestions/files",
        files=[("files", (name, b"Text."))],
        data=FORM,
        headers=bearer(writer),
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "files[0]"


def test_an_upload_over_the_size_limit_is_refused(
    make_service: Callable[..., Service], client_for: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(uploads, "MAX_UPLOAD_BYTES", 1000)
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    response = client_for(service).post(
        "/v1/ingestions/files", files=mixed_files(), data=FORM, headers=bearer(writer)
    )
    assert response.status_code == 413
    assert service.application.index_state().error == "IndexNotFound"

"""The status page: the index of the key's tenant, the model, capacity, recent refusals,
and the "ingest a file" form through the service's own ingestion."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from ragwright.adapters.sources import SUPPORTED_SUFFIXES
from tests.web.conftest import Site, ask, sign_in

NOTE = """---
document_id: page-upload-note
document_type: runbook
publication_state: published
---
# Pager rotation handover

## Handover

Hand the pager over at nine in the morning, after reading the overnight incident log.
"""


def test_the_status_page_shows_the_index_model_capacity_and_recent_refusals(
    page: Page, site: Site
) -> None:
    sign_in(page, site)
    site.model.behaviour = "insufficient"
    ask(page, "Who signs the expense reports for the offsite?")
    page.get_by_role("link", name="Status").click()
    expect(page.get_by_role("heading", name="Status")).to_be_visible()
    expect(page.locator("#documents")).to_contain_text("worker-shutdown")
    expect(page.locator("main")).to_contain_text("section-paragraphs-80w-overlap1-v1")
    expect(page.locator("#check-model")).to_have_text("answering")
    limit = site.application.settings.service.concurrency
    expect(page.locator("#capacity")).to_contain_text(f"0 of {limit} requests")
    refusals = page.locator("#refusals")
    expect(refusals).to_contain_text("insufficient")
    expect(refusals).to_contain_text("the passages found do not answer the question")
    expect(refusals).not_to_contain_text("expense")  # a reason, never the question


def test_ingesting_a_file_adds_it_and_names_what_a_refused_file_lacks(
    page: Page, site: Site, tmp_path: Path
) -> None:
    sign_in(page, site)
    page.goto(site.url + "/ui/status")
    accepted = page.get_by_label("Document file").get_attribute("accept") or ""
    assert set(accepted.split(",")) == set(SUPPORTED_SUFFIXES)
    note = tmp_path / "pager-handover.md"
    note.write_text(NOTE, encoding="utf-8")
    page.get_by_label("Document file").set_input_files(str(note))
    page.get_by_role("button", name="Ingest").click()
    expect(page.locator("#ingestion")).to_contain_text("Ingested pager-handover.md: 1 documents")
    expect(page.locator("#documents")).to_contain_text("page-upload-note")
    expect(page.locator("main")).to_contain_text("Last ingestion through this service:")
    other = tmp_path / "notes.md"
    other.write_text("---\npublication_sate: draft\n---\n# Notes\n\nText.\n", encoding="utf-8")
    page.get_by_label("Document file").set_input_files(str(other))
    page.get_by_role("button", name="Ingest").click()
    # Read like ragwright ingest reads it, and refused naming the key it resembles.
    expect(page.locator("#ingestion")).to_contain_text("notes.md:")
    expect(page.locator("#ingestion")).to_contain_text("did you mean 'publication_state'")
    expect(page.locator("#ingestion")).not_to_contain_text("/tmp")


def test_an_uploaded_document_outside_the_keys_types_is_refused_like_the_api(
    page: Page, site: Site, tmp_path: Path
) -> None:
    sign_in(page, site)
    page.goto(site.url + "/ui/status")
    note = tmp_path / "policy.md"
    note.write_text(NOTE.replace("runbook", "policy").replace("page-upload-note", "p2"), "utf-8")
    page.get_by_label("Document file").set_input_files(str(note))
    page.get_by_role("button", name="Ingest").click()
    expect(page.locator("#ingestion .error")).to_contain_text("document_type")
    expect(page.locator("#documents")).not_to_contain_text("p2")


def test_a_key_without_the_search_scope_is_told_it_cannot_see_the_status(
    page: Page, site: Site
) -> None:
    from ragwright.application import AddKeyRequest

    added = site.application.add_key(AddKeyRequest(tenant="acme", scopes=("answer",), name="a"))
    site.secrets["answer-only"] = added.secret
    sign_in(page, site, "answer-only")
    response = page.goto(site.url + "/ui/status")
    assert response is not None and response.status == 403
    expect(page.locator("#no-status-scope")).to_contain_text("lacks the search scope")
    expect(page.locator("#documents")).to_have_count(0)

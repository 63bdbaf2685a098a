"""A cited passage read back under the reader's whole grant (application/passages.py)."""

from __future__ import annotations

import pytest

from ragwright.application import AddKeyRequest, Application, IngestRequest
from ragwright.application.keys import ApiKey
from ragwright.application.passages import read_passage
from tests.application.components import fake_application
from tests.service.conftest import CORPUS

CHUNK = "shutdown-and-the-queue/p0"


@pytest.fixture(scope="module")
def application(tmp_path_factory: pytest.TempPathFactory) -> Application:
    application, _ = fake_application(tmp_path_factory.mktemp("passages") / "home")
    application.ingest(IngestRequest((CORPUS,), tenant="acme"))
    return application


def key(application: Application, tenant: str | None = "acme", **grant: object) -> ApiKey:
    added = application.add_key(AddKeyRequest(tenant=tenant, scopes=("answer",), **grant))
    return added.key


def test_a_passage_comes_back_with_its_title_section_revision_and_text(
    application: Application,
) -> None:
    passage = read_passage(application, key(application), "worker-shutdown", CHUNK)
    assert passage is not None
    assert passage.title == "Stop a background worker cleanly"
    assert passage.section == "Shutdown and the queue"
    assert passage.revision.startswith("sha256:")
    assert "Drain the remaining jobs only while the shutdown deadline allows it." in passage.text
    assert passage.page is None


@pytest.mark.parametrize(
    ("tenant", "grant", "document_id", "seen"),
    [
        ("other", {}, "worker-shutdown", False),  # another tenant's document
        (None, {}, "worker-shutdown", False),  # untenanted keys see untenanted documents
        ("acme", {"documents": ("database-failover",)}, "worker-shutdown", False),
        ("acme", {"documents": ("worker-shutdown",)}, "worker-shutdown", True),
        ("acme", {}, "worker-shutdown-draft", False),  # drafts are not a default state
        ("acme", {"states": ("draft",)}, "worker-shutdown-draft", True),
        ("acme", {"states": ("draft",)}, "worker-shutdown", False),  # the key's states only
        ("acme", {"types": ("note",)}, "worker-shutdown", False),
    ],
)
def test_a_passage_outside_the_grant_reads_as_absent(
    application: Application,
    tenant: str | None,
    grant: dict[str, object],
    document_id: str,
    seen: bool,
) -> None:
    reader = key(application, tenant, **grant)
    assert (read_passage(application, reader, document_id, CHUNK) is not None) is seen


def test_an_unknown_chunk_reads_as_absent(application: Application) -> None:
    assert read_passage(application, key(application), "worker-shutdown", "nope/p9") is None

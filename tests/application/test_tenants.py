"""One tenant's ingest never changes or deletes another tenant's documents (issue 9, 1).

Every case goes through ``Application.ingest`` on the real index, with two tenants whose
folders hold a file of the same name and an untenanted folder beside them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragwright.application import Application, IngestRequest
from ragwright.core.points import read_payload
from ragwright.errors import SourceError, VectorIndexError
from ragwright.protocols import VectorIndex
from ragwright.types import SharedDocumentId
from tests.application.components import FakeComponents, fake_application

TEXTS = {
    "acme": "Acme refunds go back to the original card within five days.",
    "globex": "Globex refunds are paid as store credit after a manager signs off.",
    None: "Every tenant pages the on-call engineer for a full outage.",
}
ROOTS = {"acme": "acme", "globex": "globex", None: "shared"}


def write_doc(path: Path, tenant: str | None, text: str, title: str = "Refunds") -> None:
    meta = "document_type: runbook\npublication_state: published\n"
    if tenant is not None:
        meta += f"tenant: {tenant}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{meta}---\n# {title}\n\n## Steps\n\n{text}\n", "utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """acme/faq.md and globex/faq.md (same file name, tenant in front matter) and an
    untenanted shared/guide.md."""
    root = tmp_path / "corpus"
    write_doc(root / "acme" / "faq.md", "acme", TEXTS["acme"])
    write_doc(root / "globex" / "faq.md", "globex", TEXTS["globex"])
    write_doc(root / "shared" / "guide.md", None, TEXTS[None], title="Outages")
    return root


def held(app: Application, components: FakeComponents) -> dict[tuple[str | None, str], str]:
    """(tenant, document id) → the live text the index holds for it."""
    index = components.open_index(app.chunking_policy().version, write=False)
    try:
        texts: dict[tuple[str | None, str], str] = {}
        for point in index.scroll():
            payload = read_payload(point.point_id, point.payload)
            assert payload.index_state == "live"
            texts[(payload.tenant, payload.document_id)] = payload.text
        return texts
    finally:
        index.close()


def expected(*tenants: str | None) -> dict[tuple[str | None, str], str]:
    return {
        (tenant, "guide" if tenant is None else "faq"): f"Steps\n\n{TEXTS[tenant]}"
        for tenant in tenants
    }


@pytest.mark.parametrize("prune", [False, True], ids=["no-prune", "prune"])
@pytest.mark.parametrize(
    "order",
    list(itertools.permutations(["acme", "globex", None])),
    ids=lambda order: "-".join(t or "untenanted" for t in order),
)
def test_no_ingest_order_changes_another_tenants_documents(
    tmp_path: Path, corpus: Path, order: tuple[str | None, ...], prune: bool
) -> None:
    app, components = fake_application(tmp_path / "home")
    for step, tenant in enumerate(order, start=1):
        result = app.ingest(IngestRequest(sources=(corpus / ROOTS[tenant],), prune=prune))
        assert (result.deleted, result.documents_pruned) == (0, 0)
        assert result.tenants == (tenant,)
        assert held(app, components) == expected(*order[:step])
    status = {(d.tenant, d.document_id) for d in app.status().documents}
    assert status == set(expected(*order))


def test_both_tenants_in_one_run_are_two_documents(tmp_path: Path, corpus: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    result = app.ingest(
        IngestRequest(sources=(corpus / "acme", corpus / "globex", corpus / "shared"), prune=True)
    )
    assert result.documents == 3 and result.tenants == (None, "acme", "globex")
    assert held(app, components) == expected("acme", "globex", None)
    assert result.shared_ids == ()  # the two faqs arrive together: neither was held before


def test_prune_deletes_only_within_the_tenants_of_the_run(tmp_path: Path, corpus: Path) -> None:
    write_doc(corpus / "acme" / "billing.md", "acme", "Acme invoices go out monthly.")
    write_doc(corpus / "globex" / "billing.md", "globex", "Globex invoices go out weekly.")
    app, components = fake_application(tmp_path / "home")
    for root in ("acme", "globex", "shared"):
        app.ingest(IngestRequest(sources=(corpus / root,)))
    (corpus / "acme" / "billing.md").unlink()

    result = app.ingest(IngestRequest(sources=(corpus / "acme",), prune=True))

    assert (result.documents_pruned, result.tenants) == (1, ("acme",))
    assert result.sources == (str(corpus / "acme"),) and result.pruned
    assert set(held(app, components)) == {
        ("acme", "faq"),
        ("globex", "faq"),
        ("globex", "billing"),
        (None, "guide"),
    }


def test_tenant_option_sets_the_tenant_of_files_without_one_and_scopes_prune(
    tmp_path: Path, corpus: Path
) -> None:
    plain = tmp_path / "plain"
    write_doc(plain / "faq.md", None, "Plain refunds need a receipt.")
    write_doc(plain / "billing.md", None, "Plain invoices go out yearly.")
    app, components = fake_application(tmp_path / "home")
    app.ingest(IngestRequest(sources=(corpus / "globex", corpus / "shared")))

    first = app.ingest(IngestRequest(sources=(plain,), tenant="acme"))
    assert first.tenants == ("acme",)
    assert {key for key in held(app, components) if key[0] == "acme"} == {
        ("acme", "faq"),
        ("acme", "billing"),
    }
    (plain / "billing.md").unlink()
    pruned = app.ingest(IngestRequest(sources=(plain,), tenant="acme", prune=True))

    assert (pruned.documents_pruned, pruned.tenants) == (1, ("acme",))
    assert set(held(app, components)) == {("acme", "faq"), ("globex", "faq"), (None, "guide")}


def test_a_document_whose_tenant_changes_is_a_new_document_and_is_reported(
    tmp_path: Path, corpus: Path
) -> None:
    app, components = fake_application(tmp_path / "home")
    app.ingest(IngestRequest(sources=(corpus / "acme",)))
    write_doc(corpus / "acme" / "faq.md", "globex", TEXTS["acme"])

    moved = app.ingest(IngestRequest(sources=(corpus / "acme",), prune=True))

    assert moved.shared_ids == (SharedDocumentId("faq", "globex", ("acme",)),)
    assert moved.to_dict()["shared_ids"] == [
        {"document_id": "faq", "tenant": "globex", "other_tenants": ["acme"]}
    ]
    assert (moved.tenants, moved.deleted) == (("globex",), 0)
    texts = held(app, components)
    assert texts[("acme", "faq")] == texts[("globex", "faq")]
    # The old tenant's copy goes only when that tenant's own scope is pruned.
    write_doc(tmp_path / "acme-now" / "other.md", "acme", "Acme keeps one other runbook.")
    cleanup = app.ingest(IngestRequest(sources=(tmp_path / "acme-now",), prune=True))
    assert cleanup.documents_pruned == 1
    assert set(held(app, components)) == {("globex", "faq"), ("acme", "other")}
    again = app.ingest(IngestRequest(sources=(corpus / "acme",)))
    assert (again.unchanged, again.shared_ids) == (again.chunks, ())


def test_rebuild_is_refused_while_other_tenants_are_indexed(tmp_path: Path, corpus: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    for root in ("acme", "globex"):
        app.ingest(IngestRequest(sources=(corpus / root,)))
    with pytest.raises(SourceError, match=r"--rebuild refused: .*acme \(1 chunks\)"):
        app.ingest(IngestRequest(sources=(corpus / "globex",), rebuild=True))
    assert set(held(app, components)) == {("acme", "faq"), ("globex", "faq")}
    # Sources covering every tenant the collection holds may rebuild it.
    rebuilt = app.ingest(IngestRequest(sources=(corpus / "acme", corpus / "globex"), rebuild=True))
    assert rebuilt.embedded == 2
    assert set(held(app, components)) == {("acme", "faq"), ("globex", "faq")}


def test_rebuild_is_refused_while_untenanted_documents_are_indexed(
    tmp_path: Path, corpus: Path
) -> None:
    app, components = fake_application(tmp_path / "home")
    for root in ("shared", "globex"):
        app.ingest(IngestRequest(sources=(corpus / root,)))
    with pytest.raises(SourceError, match=r"--rebuild refused: .*\(untenanted\) \(1 chunks\)"):
        app.ingest(IngestRequest(sources=(corpus / "globex",), rebuild=True))
    assert set(held(app, components)) == {(None, "guide"), ("globex", "faq")}


class TenantsUnreadable(FakeComponents):
    """The index opens, but reading its points fails as a server timing out does: the
    check before a rebuild is the only reader; the rebuild's own writes go through."""

    def open_index(self, chunking_version: str, *, write: bool, **options: object) -> VectorIndex:
        index = super().open_index(chunking_version, write=write, **options)  # type: ignore[arg-type]
        if write:
            return index
        return _FailingScroll(index)


class _FailingScroll:
    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self.scrolls = 0

    def scroll(self, *args: object, **kwargs: object) -> Iterator[object]:
        self.scrolls += 1
        raise VectorIndexError("the index server did not answer within 5.0 s (timed out)")
        yield  # pragma: no cover

    def __getattr__(self, name: str) -> object:
        return getattr(self.index, name)


def test_rebuild_is_refused_when_the_tenants_cannot_be_read(tmp_path: Path, corpus: Path) -> None:
    # Regression (issue 20): a read error here let the rebuild delete every tenant.
    app, components = fake_application(tmp_path / "home")
    for root in ("acme", "globex"):
        app.ingest(IngestRequest(sources=(corpus / root,)))
    failing = TenantsUnreadable(components.settings)
    with pytest.raises(VectorIndexError) as refused:
        Application(failing).ingest(IngestRequest(sources=(corpus / "globex",), rebuild=True))
    message = str(refused.value)
    assert message.startswith("--rebuild refused: cannot read which tenants")
    assert "timed out" in message and "nothing was deleted" in message and "\n" not in message
    assert set(held(app, components)) == {("acme", "faq"), ("globex", "faq")}

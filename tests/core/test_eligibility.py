from __future__ import annotations

import dataclasses
import uuid

import pytest

from ragwright.core.eligibility import CallerScope, Eligibility, check_payload, eligibility_filter
from ragwright.core.points import ChunkPayload
from ragwright.errors import PayloadError
from ragwright.types import FieldMatch, ParagraphPositions

E = Eligibility(chunking_version="v1")
PAYLOAD = ChunkPayload(
    point_id=uuid.uuid4(),
    document_id="d",
    chunk_id="s/p0",
    chunk_point_id="x",
    chunking_version="v1",
    section_id="s",
    title="T",
    heading="H",
    text="H\n\nx",
    document_type="runbook",
    publication_state="published",
    revision="r",
    content_hash="h",
    index_state="live",
    document_digest="g",
    positions=ParagraphPositions(0, (0,)),
    tenant=None,
    source_uri=None,
)


def test_default_filter_requires_live_published_runbooks_without_tenant() -> None:
    flt = eligibility_filter(E, CallerScope())
    assert FieldMatch("index_state", ("live",)) in flt.must
    assert FieldMatch("chunking_version", ("v1",)) in flt.must
    assert FieldMatch("document_type", ("runbook",)) in flt.must
    assert FieldMatch("publication_state", ("published",)) in flt.must
    assert flt.empty == ("tenant",)


def test_tenant_and_allowlist_come_from_scope() -> None:
    flt = eligibility_filter(E, CallerScope(tenant="acme", allowed_documents=("a", "b")))
    assert FieldMatch("tenant", ("acme",)) in flt.must
    assert FieldMatch("document_id", ("a", "b")) in flt.must
    assert flt.empty == ()


def test_empty_allowlist_sees_nothing() -> None:
    assert CallerScope(allowed_documents=()).sees_nothing
    assert not CallerScope().sees_nothing


@pytest.mark.parametrize(
    ("change", "scope", "field"),
    [
        ({"publication_state": "draft"}, CallerScope(), "publication_state"),
        ({"document_type": "note"}, CallerScope(), "document_type"),
        ({"chunking_version": "v2"}, CallerScope(), "chunking_version"),
        ({"index_state": "staged"}, CallerScope(), "index_state"),
        ({"tenant": "other"}, CallerScope(), "tenant"),
        ({}, CallerScope(tenant="acme"), "tenant"),
        ({}, CallerScope(allowed_documents=("x",)), "document_id"),
    ],
)
def test_payload_outside_eligibility_raises(
    change: dict[str, str], scope: CallerScope, field: str
) -> None:
    with pytest.raises(PayloadError) as caught:
        check_payload(dataclasses.replace(PAYLOAD, **change), E, scope)
    assert caught.value.field == field


def test_matching_payload_passes() -> None:
    check_payload(PAYLOAD, E, CallerScope())

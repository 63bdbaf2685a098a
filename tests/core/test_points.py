from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from ragwright.core.chunking import build_chunks
from ragwright.core.documents import validate_document
from ragwright.core.points import LIVE, plan_document, read_payload, stored_point_id
from ragwright.errors import PayloadError
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import ChunkingPolicy, SourceSection


def plan(paragraphs: tuple[str, ...] = ("First paragraph.", "Second one."), **meta: Any):  # type: ignore[no-untyped-def]
    fields: dict[str, Any] = {
        "document_id": "doc",
        "title": "Title",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [SourceSection("s", "Heading", paragraphs)],
    }
    fields.update(meta)
    document = validate_document(**fields)
    return plan_document(
        document, build_chunks(document, ChunkingPolicy(max_words=4)), HASHING_PROFILE
    )


def test_stored_id_derives_from_chunk_identity_and_content() -> None:
    first = plan()
    point = first.points[0]
    assert point.stored_id == stored_point_id(point.chunk.point_id, point.payload["content_hash"])
    assert point.payload["chunk_point_id"] == str(point.chunk.point_id)
    edited = plan(("First paragraph changed.", "Second one."))
    assert edited.points[0].stored_id != point.stored_id
    assert edited.points[1].stored_id == first.points[1].stored_id


def test_metadata_change_keeps_stored_ids_but_changes_digest() -> None:
    published, draft = plan(), plan(publication_state="draft")
    assert [p.stored_id for p in published.points] == [p.stored_id for p in draft.points]
    assert published.digest != draft.digest
    assert draft.document_fields["publication_state"] == "draft"
    assert draft.document_fields["index_state"] == LIVE


def test_payload_round_trips_through_validation() -> None:
    point = plan(tenant="acme").points[0]
    payload = read_payload(point.stored_id, point.payload)
    assert payload.tenant == "acme"
    assert payload.text == point.chunk.text
    assert payload.positions == point.chunk.positions


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"document_id": None}, "document_id"),
        ({"publication_state": ["published"]}, "publication_state"),
        ({"chunking_version": 3}, "chunking_version"),
        ({"text": "   "}, "text"),
        ({"tenant": ""}, "tenant"),
        ({"positions": {"section_index": -1, "paragraphs": [0]}}, "positions.section_index"),
        ({"positions": {"section_index": 0, "paragraphs": []}}, "positions.paragraphs"),
        ({"positions": "0:1"}, "positions"),
        ({"pages": [3]}, "pages"),
        ({"pages": [4, 3]}, "pages"),
        ({"pages": [0, 1]}, "pages"),
        ({"pages": ["1", "2"]}, "pages"),
        ({"pages": "p. 3"}, "pages"),
    ],
)
def test_read_payload_fails_closed(change: dict[str, Any], field: str) -> None:
    point = plan().points[0]
    payload = {**point.payload, **change}
    payload = {k: v for k, v in payload.items() if v is not None}
    with pytest.raises(PayloadError) as caught:
        read_payload(point.stored_id, payload)
    assert caught.value.field == field


def test_missing_payload_fails_closed() -> None:
    with pytest.raises(PayloadError):
        read_payload(uuid.uuid4(), None)


def test_plans_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan().points[0].stored_id = uuid.uuid4()  # type: ignore[misc]


def test_paged_chunks_store_their_first_and_last_page_and_read_back() -> None:
    paged = plan(
        ("One two three.", "Four five six.", "Seven eight."),
        sections=[
            SourceSection("s", "H", ("One two three.", "Four five six.", "Seven eight."), (2, 3, 3))
        ],
    )
    assert [p.payload["pages"] for p in paged.points] == [[2, 2], [3, 3], [3, 3]]
    assert read_payload(paged.points[0].stored_id, paged.points[0].payload).pages == (2, 2)


def test_documents_without_pages_keep_the_payload_they_always_had() -> None:
    point = plan().points[0]
    assert "pages" not in point.payload
    assert read_payload(point.stored_id, point.payload).pages is None
    # The content revision of a section without pages is what it was before pages existed.
    assert plan().document.revision == (
        "sha256:"
        + __import__("hashlib")
        .sha256(b'["Title",[["s","Heading",["First paragraph.","Second one."]]]]')
        .hexdigest()
    )

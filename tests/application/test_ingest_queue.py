"""Work item bodies: what a worker on another machine gets is the run's documents, policy
and context exactly as the coordinator had them."""

from __future__ import annotations

import json

import pytest

from ragwright.application.ingest_queue import (
    ITEM_FORMAT,
    document_from_json,
    document_to_json,
    item_body,
    read_item_body,
)
from ragwright.errors import RequestError
from ragwright.types import ChunkingPolicy, SourceDocument, SourceSection

DOCUMENTS = (
    SourceDocument(
        "faq",
        "Questions",
        "runbook",
        "draft",
        (SourceSection("intro", "Questions", ("One.", "Two\nlines.")),),
        revision="r7",
        source_uri="docs/faq.md",
        tenant="acme",
    ),
    # A BEIR document: blank title and heading, no tenant, no source.
    SourceDocument("4983", "", "note", "published", (SourceSection("text", "", ("T.",)),), "h1"),
)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.document_id)
def test_a_document_survives_the_item_unchanged(document: SourceDocument) -> None:
    assert document_from_json(json.loads(json.dumps(document_to_json(document)))) == document


def test_an_item_body_carries_documents_policy_context_and_profiles() -> None:
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=120, overlap=False, max_tokens=256)
    body = item_body(
        DOCUMENTS,
        context={"chunking_version": policy.version, "staging_avgdl": 25.6},
        policy=policy,
        embedding_profile="minilm",
        lexical_profile="bm25",
        deadline_at=1_800_000_000.5,
    )
    read = read_item_body(json.loads(json.dumps(body)))
    assert read.documents == DOCUMENTS
    assert read.policy == policy
    assert read.context == {"chunking_version": policy.version, "staging_avgdl": 25.6}
    assert (read.embedding_profile, read.lexical_profile) == ("minilm", "bm25")
    assert read.deadline_at == 1_800_000_000.5
    # An item of a run without a deadline, or from a ragwright that sent none.
    assert read_item_body({**body, "deadline_at": None}).deadline_at is None
    assert read_item_body({k: v for k, v in body.items() if k != "deadline_at"}).deadline_at is None


def test_a_body_of_another_format_is_refused() -> None:
    body = item_body(
        DOCUMENTS, context={}, policy=ChunkingPolicy(), embedding_profile="e", lexical_profile="l"
    )
    with pytest.raises(RequestError, match="format"):
        read_item_body({**body, "format": ITEM_FORMAT + 1})

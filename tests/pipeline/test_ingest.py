from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bm25s
import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.core.points import lexical_text, read_payload
from ragwright.errors import (
    ChunkingError,
    ContractMismatch,
    DimensionMismatch,
    EmbeddingProviderError,
    FailureCategory,
    SourceProblems,
)
from ragwright.pipeline.ingest import ingest
from ragwright.pipeline.retrieve import Retriever
from ragwright.protocols import BULK_EMBEDDING
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import (
    ChunkingPolicy,
    FieldMatch,
    LexicalStats,
    PointFilter,
    SourceDocument,
    SourceSection,
)

POLICY = ChunkingPolicy(max_words=30)
P = [
    "Stop accepting new work when shutdown begins and complete the writer.",
    "Drain queued items only while the shutdown deadline allows it.",
    "Pass the deadline token to every call made while draining.",
    "A completed writer rejects writes; producers must stop retrying.",
]


def doc(
    document_id: str = "runbook", paragraphs: list[str] | None = None, **meta: Any
) -> SourceDocument:
    fields: dict[str, Any] = {
        "document_id": document_id,
        "title": "Stop a worker",
        "document_type": "runbook",
        "publication_state": "published",
        "sections": [SourceSection("shutdown", "Shutdown", tuple(paragraphs or P))],
    }
    fields.update(meta)
    return validate_document(**fields)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[EdgeIndex]:
    with EdgeIndex(tmp_path / "index", contract_for(HASHING_PROFILE, POLICY.version)) as opened:
        yield opened


def live_texts(index: EdgeIndex, document_id: str) -> set[str]:
    flt = PointFilter(
        must=(FieldMatch("document_id", (document_id,)), FieldMatch("index_state", ("live",)))
    )
    return {read_payload(p.point_id, p.payload).text for p in index.scroll(flt)}


def snapshot(index: EdgeIndex) -> list[tuple[str, str]]:
    """Every point id with its payload, canonical and sorted."""
    return sorted((str(p.point_id), json.dumps(p.payload, sort_keys=True)) for p in index.scroll())


def run(
    index: EdgeIndex,
    documents: list[SourceDocument],
    embedder: HashingEmbedder | None = None,
    **kw: Any,
):  # type: ignore[no-untyped-def]
    return ingest(
        documents,
        policy=POLICY,
        embedder=embedder or HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
        batch_size=2,
        **kw,
    )


def test_first_run_embeds_writes_and_verifies_every_chunk(index: EdgeIndex) -> None:
    embedder = HashingEmbedder()
    report = run(index, [doc(), doc("note", document_type="note")], embedder)
    assert (report.documents, report.embedded, report.verified, report.unchanged) == (
        2,
        report.chunks,
        report.chunks,
        0,
    )
    assert index.count() == report.chunks
    assert len(embedder.embedded_texts) == report.chunks
    assert all(text.startswith("Stop a worker\n\nShutdown\n\n") for text in embedder.embedded_texts)


def test_identical_rerun_embeds_and_writes_nothing(index: EdgeIndex) -> None:
    run(index, [doc()])
    embedder = HashingEmbedder()
    report = run(index, [doc()], embedder)
    assert embedder.calls == []
    assert (report.embedded, report.payload_updated, report.deleted, report.verified) == (
        0,
        0,
        0,
        0,
    )
    assert report.unchanged == report.chunks


def test_publishing_a_draft_updates_payload_without_embedding(index: EdgeIndex) -> None:
    run(index, [doc(publication_state="draft")])
    embedder = HashingEmbedder()
    report = run(index, [doc()], embedder)
    assert embedder.calls == []
    assert report.payload_updated == report.chunks
    states = {p.payload["publication_state"] for p in index.scroll()}
    assert states == {"published"}


def test_editing_one_paragraph_reembeds_only_windows_containing_it(index: EdgeIndex) -> None:
    first = run(index, [doc()])
    edited = [*P[:3], "A completed writer rejects writes; producers stop and report."]
    assert len(edited[3].split()) == len(P[3].split())  # same windows, one changed text
    embedder = HashingEmbedder()
    report = run(index, [doc(paragraphs=edited)], embedder)
    assert 0 < report.embedded < first.chunks
    assert all("producers stop and report" in t for t in embedder.embedded_texts)
    assert report.deleted == report.embedded
    assert index.count() == first.chunks
    assert not any("producers must stop retrying" in t for t in live_texts(index, "runbook"))


def test_chunks_that_no_longer_exist_are_deleted(index: EdgeIndex) -> None:
    run(index, [doc()])
    report = run(index, [doc(paragraphs=P[:1])])
    assert index.count() == report.chunks == 1
    assert report.deleted >= 1


def test_prune_removes_documents_missing_from_the_source_set(index: EdgeIndex) -> None:
    run(index, [doc("a"), doc("b")])
    kept = run(index, [doc("a")])
    assert kept.deleted == 0 and live_texts(index, "b")
    pruned = run(index, [doc("a")], prune=True)
    assert pruned.documents_pruned == 1
    assert not live_texts(index, "b") and live_texts(index, "a")


def test_other_chunking_versions_are_left_alone(tmp_path: Path) -> None:
    other = ChunkingPolicy(max_words=30, overlap=False)
    with EdgeIndex(tmp_path / "i", contract_for(HASHING_PROFILE, POLICY.version)) as index:
        run(index, [doc()])
    with EdgeIndex(
        tmp_path / "i", contract_for(HASHING_PROFILE, other.version), add_chunking_version=True
    ) as index:
        ingest(
            [doc()],
            policy=other,
            embedder=HashingEmbedder(),
            sparse_encoder=Bm25Encoder(),
            index=index,
            prune=True,
        )
        versions = {p.payload["chunking_version"] for p in index.scroll()}
    assert versions == {POLICY.version, other.version}


def test_reader_never_sees_a_mix_of_revisions_during_replacement(index: EdgeIndex) -> None:
    run(index, [doc(publication_state="draft")])
    old = live_texts(index, "runbook")
    new_paragraphs = [
        P[0],
        "Drain queued items only until the deadline, then cancel I/O.",
        P[2],
        P[3],
    ]
    seen: list[tuple[str, set[str], set[str]]] = []

    def observe(document_id: str, phase: str) -> None:
        visible = live_texts(index, document_id)
        published = {
            read_payload(p.point_id, p.payload).text
            for p in index.scroll(
                PointFilter(
                    must=(
                        FieldMatch("document_id", (document_id,)),
                        FieldMatch("index_state", ("live",)),
                        FieldMatch("publication_state", ("published",)),
                    )
                )
            )
        }
        seen.append((phase, visible, published))

    run(index, [doc(paragraphs=new_paragraphs)], phase_hook=observe)
    expected_new = live_texts(index, "runbook")
    assert old != expected_new
    assert [phase for phase, _, _ in seen] == ["staged", "obsolete-deleted", "live"]
    for phase, visible, published in seen:
        assert visible <= old or visible <= expected_new, phase
        # The publication flip is one operation: published text is all-new or nothing.
        assert published in (set(), expected_new), phase
    assert seen[0][1] == old and seen[-1][1] == expected_new


def test_embedding_failure_midway_then_rerun_converges_without_reembedding(
    index: EdgeIndex, tmp_path: Path
) -> None:
    documents = [doc(f"d{i}") for i in range(4)]
    failing = HashingEmbedder(fail_after_calls=2)
    with pytest.raises(RuntimeError):
        run(index, documents, failing)
    staged = index.count(PointFilter(must=(FieldMatch("index_state", ("staged",)),)))
    assert staged == len(failing.embedded_texts) > 0
    assert index.count(PointFilter(must=(FieldMatch("index_state", ("live",)),))) == 0
    resumed = HashingEmbedder()
    report = run(index, documents, resumed)
    assert report.embedded == report.chunks - staged
    with EdgeIndex(tmp_path / "clean", contract_for(HASHING_PROFILE, POLICY.version)) as clean:
        run(clean, documents)
        expected = snapshot(clean)
    assert snapshot(index) == expected


def _small_profile(index: EdgeIndex, tokens: int) -> HashingEmbedder:
    small = dataclasses.replace(HASHING_PROFILE, max_input_tokens=tokens)
    index.contract = dataclasses.replace(
        index.contract, profile_id=small.profile_id, profile_digest=small.artifact_digest
    )
    return HashingEmbedder(profile=small)


def test_chunks_are_split_to_the_profiles_input_limit_instead_of_refused(
    index: EdgeIndex,
) -> None:
    embedder = _small_profile(index, 14)
    report = run(index, [doc("new")], embedder)
    lengths = embedder.count_tokens([text for call in embedder.calls for text in call])
    assert report.embedded > len(P) and max(lengths) <= 14  # more, shorter chunks
    assert report.split_documents == 1 and report.split_sources == ("new",)


def test_a_heading_over_the_input_limit_is_named_and_nothing_is_written(
    index: EdgeIndex,
) -> None:
    run(index, [doc("kept")])
    before = snapshot(index)
    embedder = _small_profile(index, 12)
    long = doc("long", sections=[SourceSection("s", "word " * 14, ("Text.",))])
    other = doc("other", sections=[SourceSection("s", "more " * 14, ("Text.",))])
    with pytest.raises(SourceProblems) as caught:
        run(index, [doc("kept"), long, other], embedder)
    assert [source for source, _ in caught.value.problems] == ["long", "other"]
    assert all(r.startswith("chunking: section 's'") for _, r in caught.value.problems)
    assert "tokens" in str(caught.value) and "--skip-invalid" in str(caught.value)
    assert embedder.calls == []
    assert snapshot(index) == before


def test_skip_invalid_leaves_the_problem_documents_out_and_keeps_their_stored_points(
    index: EdgeIndex,
) -> None:
    run(index, [doc("kept"), doc("long")])
    stored_long = [p for p in snapshot(index) if '"long"' in p[1]]
    embedder = _small_profile(index, 12)
    long = doc("long", sections=[SourceSection("s", "word " * 14, ("Text.",))])
    report = run(index, [doc("kept"), long], embedder, prune=True, skip_invalid=True)
    assert [(d.document_id, d.field) for d in report.left_out] == [("long", "chunking")]
    assert "shorten the heading" in report.left_out[0].reason
    assert [p for p in snapshot(index) if '"long"' in p[1]] == stored_long  # not pruned


def test_chunking_error_loses_nothing_already_stored(index: EdgeIndex) -> None:
    run(index, [doc()])
    before = snapshot(index)
    embedder = HashingEmbedder()
    with pytest.raises(ChunkingError, match="the heading alone has 90 words"):
        run(index, [doc(), doc("huge", sections=[SourceSection("s", "word " * 90, ("x",))])])
    assert embedder.calls == []
    assert snapshot(index) == before


def test_profile_that_does_not_match_the_collection_stops_the_run(index: EdgeIndex) -> None:
    other = dataclasses.replace(HASHING_PROFILE, profile_id="other-v1")
    with pytest.raises(ContractMismatch) as caught:
        run(index, [doc()], HashingEmbedder(profile=other))
    assert caught.value.field == "embedding_profile_id"
    assert index.count() == 0


def test_wrong_vector_size_stops_the_run(index: EdgeIndex) -> None:
    class ShortVectors(HashingEmbedder):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            return [v[:-1] for v in super().embed_documents(texts)]

    with pytest.raises(DimensionMismatch):
        run(index, [doc()], ShortVectors())
    assert index.count() == 0


def test_progress_events_account_for_every_chunk(index: EdgeIndex) -> None:
    events: list[tuple[str, int]] = []
    report = run(index, [doc(), doc("b")], progress=lambda event, n: events.append((event, n)))
    assert events[0] == ("plan", report.chunks)
    assert sum(n for e, n in events if e == "embedded") == report.embedded
    run(index, [doc(), doc("b")], progress=lambda event, n: events.append((event, n)))
    assert ("unchanged", report.chunks) in events


def test_source_uri_removal_drops_the_field(index: EdgeIndex) -> None:
    run(index, [doc(source_uri="runbook.md")])
    run(index, [doc()])
    assert all("source_uri" not in p.payload for p in index.scroll())


def test_a_document_losing_its_tenant_leaves_the_tenants_copy_alone(index: EdgeIndex) -> None:
    run(index, [doc(tenant="acme")])
    acme = snapshot(index)
    report = run(index, [doc()], prune=True)
    assert (report.tenants, report.deleted, report.documents_pruned) == ((None,), 0, 0)
    assert [(s.document_id, s.tenant, s.other_tenants) for s in report.shared_ids] == [
        ("runbook", None, ("acme",))
    ]
    assert set(acme) < set(snapshot(index))
    assert {p.payload.get("tenant") for p in index.scroll()} == {None, "acme"}


class CountingEmbedder(HashingEmbedder):
    """Records every token-count call (the chunker makes them for token ceilings)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def count_tokens(self, texts):  # type: ignore[no-untyped-def]
        self.counted.extend(texts)
        return super().count_tokens(texts)


def test_unchanged_documents_are_not_chunked_again(tmp_path: Path) -> None:
    policy = ChunkingPolicy(kind="sentence-blocks", max_words=30, max_tokens=40)
    alpha, beta = doc("a", title="Alpha runbook"), doc("b", title="Beta runbook")
    with EdgeIndex(tmp_path / "i", contract_for(HASHING_PROFILE, policy.version)) as index:
        first = CountingEmbedder()
        ingest(
            [alpha, beta], policy=policy, embedder=first, sparse_encoder=Bm25Encoder(), index=index
        )
        assert any(t.startswith("Alpha runbook") for t in first.counted)
        again = CountingEmbedder()
        beta_edited = doc("b", title="Beta runbook", paragraphs=P[:2])
        report = ingest(
            [alpha, beta_edited],
            policy=policy,
            embedder=again,
            sparse_encoder=Bm25Encoder(),
            index=index,
        )
    # Only "b" changed: "a" was recognised by its source digest, never chunked or counted.
    assert again.counted and all(t.startswith("Beta runbook") for t in again.counted)
    assert (report.documents, report.documents_changed) == (2, 1)


def test_a_point_deleted_behind_our_back_is_restored(index: EdgeIndex) -> None:
    first = run(index, [doc()])
    victim = next(iter(index.scroll())).point_id
    index.delete([victim])
    embedder = HashingEmbedder()
    report = run(index, [doc()], embedder)
    assert report.embedded == 1 and len(embedder.embedded_texts) == 1
    assert index.count() == first.chunks


def test_prune_with_no_documents_is_refused_and_deletes_nothing(index: EdgeIndex) -> None:
    from ragwright.errors import SourceError

    run(index, [doc()])
    before = snapshot(index)
    with pytest.raises(SourceError):
        run(index, [], prune=True)
    assert snapshot(index) == before


def test_duplicate_document_ids_are_refused_before_any_write(index: EdgeIndex) -> None:
    from ragwright.errors import DocumentError

    embedder = HashingEmbedder()
    first = dataclasses.replace(doc("same"), source_uri="first.md")
    with pytest.raises(DocumentError, match=r"\(also in first\.md\)"):
        run(
            index,
            [doc("other"), first, dataclasses.replace(doc("same"), source_uri="b.md")],
            embedder,
        )
    assert embedder.calls == [] and index.count() == 0


SHORT = [
    "Drain the queue before shutdown.",
    "Rotate the certificate before expiry.",
    "Refunds return to the original card.",
    "Page the on-call engineer for outages.",
    "Queues drain slowly under load.",
]
LONG = [
    "Stop accepting new work when shutdown begins, complete the writer and drain queued "
    "items only while the shutdown deadline allows it.",
    "Disk usage alerts fire when the log volume grows faster than rotation removes "
    "old files; compress archives and lower retention.",
]


def short_docs(texts: list[str], prefix: str = "s") -> list[SourceDocument]:
    return [doc(f"{prefix}{i}", [t], title=f"Note {i}") for i, t in enumerate(texts)]


def corpus_terms(index: EdgeIndex) -> dict[str, list[str]]:
    """chunk id → analysed terms of the BM25 text stored for it."""
    encoder = Bm25Encoder()
    return {
        f"{p.payload['document_id']}/{p.payload['chunk_id']}": encoder.terms(
            lexical_text(p.payload["title"], p.payload["heading"], p.payload["text"])
        )
        for p in index.scroll()
    }


def assert_scores_equal_reference_bm25(
    index: EdgeIndex, query: str, *, up_to_idf: bool = False
) -> None:
    """Engine scores == Lucene BM25 over the analysed corpus with its true mean length.

    ``up_to_idf`` compares scores relative to the best one, for a one-term query: the
    engine may count deleted points in its idf until segments are optimised, and the
    idf factor cancels in the ratio, leaving only the stored document weights.
    """
    terms = corpus_terms(index)
    keys = sorted(terms)
    reference = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    reference.index([terms[k] for k in keys], show_progress=False)
    # bm25s's Lucene variant omits the constant (k1 + 1) numerator.
    scores = reference.get_scores(Bm25Encoder().terms(query)) * 1.9
    expected = {k: float(e) for k, e in zip(keys, scores, strict=True) if e > 0}
    hits = index.search_sparse(Bm25Encoder().encode_query(query), PointFilter(), limit=100)
    got = {f"{h.payload['document_id']}/{h.payload['chunk_id']}": h.score or 0.0 for h in hits}
    if up_to_idf:
        expected = {k: e / max(expected.values()) for k, e in expected.items()}
        got = {k: g / max(got.values()) for k, g in got.items()}
    assert got == {k: pytest.approx(e, rel=1e-4) for k, e in expected.items()}


def test_the_collection_records_the_corpus_avgdl_and_scores_are_true_bm25(
    index: EdgeIndex,
) -> None:
    report = run(index, short_docs(SHORT))
    lengths = [len(t) for t in corpus_terms(index).values()]
    expected = LexicalStats(len(lengths), sum(lengths), sum(lengths) / len(lengths))
    assert index.contract.lexical_stats == expected
    assert report.bm25_avgdl == expected.avgdl and report.sparse_reencoded == 0
    assert_scores_equal_reference_bm25(index, "drain the queue")


def test_a_drifting_corpus_mean_reencodes_sparse_vectors_without_embedding(
    index: EdgeIndex,
) -> None:
    run(index, short_docs(SHORT))
    short = index.contract.lexical_stats
    assert short is not None
    embedder = HashingEmbedder()
    report = run(index, short_docs(SHORT) + short_docs(LONG, "long"), embedder=embedder)
    points = index.count()
    assert report.sparse_reencoded == points and report.embedded == points - len(SHORT)
    assert len(embedder.embedded_texts) == points - len(SHORT)  # old chunks not embedded
    stats = index.contract.lexical_stats
    assert stats is not None and stats.avgdl == stats.terms / stats.chunks > 1.05 * short.avgdl
    assert report.bm25_avgdl == stats.avgdl
    assert_scores_equal_reference_bm25(index, "drain the queue during shutdown")
    # Pruning the long documents brings the mean back down, and the vectors with it.
    back = run(index, short_docs(SHORT), prune=True)
    assert back.sparse_reencoded == len(SHORT) and back.embedded == 0
    assert index.contract.lexical_stats == short
    assert_scores_equal_reference_bm25(index, "queue", up_to_idf=True)


def test_a_drift_within_the_tolerance_updates_counts_but_keeps_vectors(
    index: EdgeIndex,
) -> None:
    texts = [f"{text} Step {i} applies." for i in range(4) for text in SHORT]
    run(index, short_docs(texts))
    before = index.contract.lexical_stats
    assert before is not None
    report = run(index, short_docs([*texts, "Rotate keys weekly and page on failure."]))
    after = index.contract.lexical_stats
    assert after is not None and after.chunks == before.chunks + 1
    assert after.terms != before.terms and after.terms / after.chunks != before.avgdl
    assert report.sparse_reencoded == 0 and after.avgdl == before.avgdl
    grown = [*texts, "Rotate keys weekly and page on failure."]
    forced = run(index, short_docs(grown), avgdl_tolerance=0.0)
    assert forced.sparse_reencoded == len(grown) and forced.embedded == 0
    assert forced.bm25_avgdl == after.terms / after.chunks


def test_an_updated_avgdl_never_fails_the_contract(tmp_path: Path) -> None:
    contract = contract_for(HASHING_PROFILE, POLICY.version)
    with EdgeIndex(tmp_path / "i", contract) as index:
        run(index, short_docs(SHORT))
        run(index, short_docs(SHORT) + short_docs(LONG, "long"))
        recorded = index.contract.lexical_stats
    with EdgeIndex(tmp_path / "i", contract) as reopened:
        assert reopened.contract.lexical_stats == recorded
        Retriever(reopened, HashingEmbedder(), Bm25Encoder())  # the contract check passes
        assert run(reopened, short_docs(SHORT) + short_docs(LONG, "long")).embedded == 0


def test_a_document_without_title_is_indexed_verified_and_read_back(index: EdgeIndex) -> None:
    untitled = validate_document(
        document_id="beir-9",
        title="",
        document_type="note",
        publication_state="published",
        sections=[SourceSection("text", "", ("Queues drain at shutdown.",))],
        allow_missing_title=True,
    )
    report = run(index, [untitled])
    assert report.verified == 1
    (point,) = index.scroll()
    payload = read_payload(point.point_id, point.payload)
    assert (payload.title, payload.heading, payload.text) == ("", "", "Queues drain at shutdown.")
    assert index.contract.lexical_stats == LexicalStats(1, 3, 3.0)  # queue, drain, shutdown


class _BulkRecordingEmbedder(HashingEmbedder):
    """Records, per call, whether it ran as ingestion's bulk embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.bulk: list[bool] = []

    def embed_documents(self, texts: Any) -> list[list[float]]:
        self.bulk.append(BULK_EMBEDDING.get())
        return super().embed_documents(texts)


def test_ingestion_embeds_as_bulk_and_a_question_after_it_does_not(index: EdgeIndex) -> None:
    # The bundled model keeps its working memory only for bulk calls; a question's
    # embedding (run after ingestion, in the same thread) must not inherit the flag.
    embedder = _BulkRecordingEmbedder()
    run(index, [doc(), doc("note", document_type="note")], embedder)
    assert embedder.bulk and all(embedder.bulk)
    embedder.bulk.clear()
    Retriever(index, embedder, Bm25Encoder()).embed("how do I drain the queue?")
    assert embedder.bulk == [False]
    assert BULK_EMBEDDING.get() is False


class RefusingEmbedder(HashingEmbedder):
    """Refuses, as a provider does (``invalid_input``), any call holding 'forbidden'."""

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if any("forbidden" in text for text in texts):
            raise EmbeddingProviderError("scripted", FailureCategory.INVALID_INPUT, "HTTP 400")
        return super().embed_documents(texts)


def test_an_input_the_provider_refuses_stops_the_run_without_skip_invalid(
    index: EdgeIndex,
) -> None:
    with pytest.raises(EmbeddingProviderError) as caught:
        run(index, [doc("a"), doc("b", paragraphs=["A forbidden word."])], RefusingEmbedder())
    assert caught.value.category is FailureCategory.INVALID_INPUT


def test_skip_invalid_leaves_out_the_document_whose_input_the_provider_refused(
    index: EdgeIndex,
) -> None:
    run(index, [doc("b")])
    stored_b = [p for p in snapshot(index) if '"b"' in p[1]]
    documents = [doc("a"), doc("b", paragraphs=["A forbidden word."]), doc("c")]
    embedder = RefusingEmbedder()
    report = run(index, documents, embedder, prune=True, skip_invalid=True)
    assert [(d.document_id, d.field) for d in report.left_out] == [("b", "embedding_input")]
    assert "the embedding provider refused a chunk of it" in report.left_out[0].reason
    assert {json.loads(p)["document_id"] for _, p in snapshot(index)} == {"a", "b", "c"}
    assert [p for p in snapshot(index) if '"b"' in p[1]] == stored_b  # kept, not pruned
    assert report.documents == 3

"""Streaming ingestion: the validation pass, slices of documents, embedding calls in
flight, and slices that can be run again (by another worker) after a crash."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragwright.adapters.edge.index import EdgeIndex
from ragwright.adapters.lexical import Bm25Encoder
from ragwright.core.contracts import contract_for
from ragwright.core.documents import validate_document
from ragwright.deadline import Deadline, current_deadline, deadline_bound, deadline_scope
from ragwright.errors import (
    ChunkingError,
    EmbeddingProviderError,
    FailureCategory,
    ReadBackError,
)
from ragwright.pipeline.ingest import finish_run, in_slices, ingest, prepare_run
from ragwright.pipeline.planning import document_key
from ragwright.pipeline.writing import ingest_slice
from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder
from ragwright.types import (
    ChunkingPolicy,
    FieldMatch,
    PointFilter,
    SliceReport,
    SourceDocument,
    SourceSection,
)

POLICY = ChunkingPolicy(max_words=30)


def doc(number: int, words: int = 12, revision: str = "a", heading: str = "Body") -> SourceDocument:
    paragraphs = tuple(
        " ".join(f"w{number}x{p}y{i}{revision}" for i in range(words)) for p in range(3)
    )
    return validate_document(
        document_id=f"doc-{number:03d}",
        title=f"Document {number}",
        document_type="runbook",
        publication_state="published",
        sections=[SourceSection("body", heading, paragraphs)],
    )


# A heading that alone is over a 30-token profile's limit: a document no chunking fits.
LONG_HEADING = " ".join(f"h{i}" for i in range(40))


def corpus(count: int, revision: str = "a") -> list[SourceDocument]:
    return [doc(n, revision=revision) for n in range(count)]


def snapshot(index: EdgeIndex) -> list[tuple[str, str]]:
    return sorted((str(p.point_id), json.dumps(p.payload, sort_keys=True)) for p in index.scroll())


@pytest.fixture
def open_index(tmp_path: Path) -> Iterator[Any]:
    opened: dict[str, EdgeIndex] = {}

    def make(name: str) -> EdgeIndex:
        if name not in opened:
            path = tmp_path / name
            opened[name] = EdgeIndex(path, contract_for(HASHING_PROFILE, POLICY.version))
        return opened[name]

    yield make
    for index in opened.values():
        index.close()


def run(index: Any, documents: Any, embedder: Any = None, **kw: Any) -> Any:
    return ingest(
        documents,
        policy=POLICY,
        embedder=embedder or HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
        batch_size=kw.pop("batch_size", 4),
        **kw,
    )


@dataclasses.dataclass
class SlowEmbedder(HashingEmbedder):
    """Takes a while per call, records how many calls overlapped and each call's
    deadline (as seen from the thread the call ran on)."""

    in_flight: int = 1
    delay: float = 0.03
    active: int = 0
    most_active: int = 0
    deadlines: list[Deadline | None] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            self.deadlines.append(current_deadline())
        try:
            time.sleep(self.delay)
            with self.lock:
                return super().embed_documents(texts)
        finally:
            with self.lock:
                self.active -= 1


def test_several_embedding_calls_are_in_flight_and_the_index_is_the_same(
    open_index: Any,
) -> None:
    documents = corpus(12)
    one = SlowEmbedder(in_flight=1)
    run(open_index("one"), documents, one)
    several = RendezvousEmbedder(in_flight=4)
    report = run(open_index("several"), documents, several)
    assert one.most_active == 1
    assert several.most_outstanding == 4
    assert report.embedded == report.chunks == len(several.embedded_texts)
    assert snapshot(open_index("one")) == snapshot(open_index("several"))


@dataclasses.dataclass
class RendezvousEmbedder(HashingEmbedder):
    """Holds every call until ``in_flight`` calls are outstanding together, then lets
    them all through (and every later call at once); records the most calls that were
    outstanding at one moment. A caller that never keeps ``in_flight`` calls outstanding
    only gets its calls back after ``patience`` seconds each, and shows fewer."""

    in_flight: int = 1
    patience: float = 30.0
    outstanding: int = 0
    most_outstanding: int = 0
    met: bool = False
    condition: threading.Condition = dataclasses.field(default_factory=threading.Condition)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with self.condition:
            self.outstanding += 1
            self.most_outstanding = max(self.most_outstanding, self.outstanding)
            if self.outstanding >= self.in_flight:
                self.met = True
                self.condition.notify_all()
            self.condition.wait_for(lambda: self.met, timeout=self.patience)
            vectors = super().embed_documents(texts)
            self.outstanding -= 1
            return vectors


def test_embedding_calls_stay_in_flight_across_document_slices(open_index: Any) -> None:
    """Each slice of 2 documents makes 2 calls of 2 chunks; 4 calls outstanding need the
    next slices' calls made while the current slice's return and are switched."""
    documents = corpus(12)
    one = run(open_index("one"), documents, HashingEmbedder(), batch_size=2, slice_size=2)
    embedder = RendezvousEmbedder(in_flight=4)
    report = run(open_index("four"), documents, embedder, batch_size=2, slice_size=2)
    assert report.chunks == 24 and len(embedder.calls) == 12  # 2 calls per slice of documents
    assert embedder.most_outstanding == embedder.in_flight == 4
    assert report == one
    assert snapshot(open_index("four")) == snapshot(open_index("one"))


def test_embedding_calls_on_worker_threads_spend_the_callers_deadline(open_index: Any) -> None:
    embedder = SlowEmbedder(in_flight=3, delay=0.0)
    with deadline_scope(Deadline.after(60.0)) as deadline:
        run(open_index("i"), corpus(6), embedder)
    assert embedder.deadlines and all(d is deadline for d in embedder.deadlines)


def test_bad_input_in_a_later_slice_stops_the_run_before_any_write(open_index: Any) -> None:
    index = open_index("i")
    run(index, corpus(3))
    before = snapshot(index)
    small = dataclasses.replace(HASHING_PROFILE, max_input_tokens=30)
    index.contract = dataclasses.replace(
        index.contract, profile_id=small.profile_id, profile_digest=small.artifact_digest
    )
    embedder = HashingEmbedder(profile=small)
    documents = [*corpus(6, revision="b"), doc(99, heading=LONG_HEADING)]
    with pytest.raises(ChunkingError) as caught:
        run(index, documents, embedder, slice_size=2)
    assert caught.value.document_id == "doc-099"
    assert embedder.calls == []
    assert snapshot(index) == before


class RecordingIndex:
    """An index whose scrolls (filter and payload fields) and facets are recorded."""

    def __init__(self, inner: EdgeIndex) -> None:
        self.inner = inner
        self.scrolls: list[tuple[PointFilter | None, tuple[str, ...] | None]] = []
        self.facets: list[str] = []
        self.facet_filters: list[PointFilter | None] = []

    def scroll(self, point_filter: PointFilter | None = None, **kw: Any) -> Any:
        fields = kw.get("payload_fields")
        self.scrolls.append((point_filter, None if fields is None else tuple(fields)))
        return self.inner.scroll(point_filter, **kw)

    def facet(self, field: str, point_filter: PointFilter | None = None, **kw: Any) -> Any:
        self.facets.append(field)
        self.facet_filters.append(point_filter)
        return self.inner.facet(field, point_filter, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_change_detection_reads_one_slice_of_documents_at_a_time(open_index: Any) -> None:
    index = RecordingIndex(open_index("i"))
    documents = corpus(10)
    run(index, documents, slice_size=3, prune=True)
    index.scrolls.clear()
    index.facets.clear()
    index.facet_filters.clear()
    report = run(index, [*documents[:9], doc(9, revision="b")], slice_size=3, prune=True)
    assert report.documents_changed == 1
    by_document = [
        next(m.values for m in flt.must if m.key == "document_id")
        for flt, _ in index.scrolls
        if flt is not None and any(m.key == "document_id" for m in flt.must)
    ]
    # Validation pass: the unchanged documents are proven so by one count-facet per slice
    # (3+3+3+1 documents) and only the changed one is scanned; writing pass: one scan,
    # of the changed one.
    assert [len(ids) for ids in by_document] == [1, 1]
    by_slice = [
        next(m.values for m in flt.must if m.key == "document_id")
        for field, flt in zip(index.facets, index.facet_filters, strict=True)
        if field == "change_key" and flt is not None
    ]
    assert [len(ids) for ids in by_slice] == [3, 3, 3, 1]
    # Nothing reads the whole collection: prune and the BM25 statistics are facets of
    # payload indexes (no stale document, so prune scrolls nothing).
    others = [
        f for f, _ in index.scrolls if f is None or all(m.key != "document_id" for m in f.must)
    ]
    assert others == []
    assert index.facets == ["change_key"] * 4 + ["document_id", "lexical_terms"]


@pytest.mark.parametrize(
    ("atomic", "phase"),
    [
        (False, "staged"),  # killed with the slice staged: the retry switches those points
        (True, "live"),  # killed after the one upsert, before its read-back
    ],
)
def test_a_slice_run_again_after_a_crash_gives_the_uninterrupted_summary(
    open_index: Any, atomic: bool, phase: str
) -> None:
    documents = corpus(6)
    expected_index = open_index("expected")
    expected = run(expected_index, documents, slice_size=3)

    index = open_index("crashed")
    index.atomic_upsert = atomic
    common: dict[str, Any] = {
        "policy": POLICY,
        "embedder": HashingEmbedder(),
        "sparse_encoder": Bm25Encoder(),
        "index": index,
    }
    plan = prepare_run(documents, **common, slice_size=3)
    slices = list(in_slices((d for d in documents if document_key(d) in plan.changed), 3))

    def crash(document_id: str, reached: str) -> None:
        if (document_id, reached) == ("doc-004", phase):
            raise KeyboardInterrupt("worker killed")

    reports = [ingest_slice(slices[0], plan.slice_context(), **common)]
    with pytest.raises(KeyboardInterrupt):
        ingest_slice(slices[1], plan.slice_context(), **common, phase_hook=crash)
    second = {d.document_id for d in slices[1]}
    # Staged: none of the slice is visible. Written live: all of it, whole.
    assert live_documents(index) & second == (second if atomic else set())
    # Another worker takes the same slice again; its report is the one recorded.
    again = ingest_slice(slices[1], plan.slice_context(), **common)
    assert again.embedded == 0  # the killed attempt's points are reused, not embedded again
    reports.append(SliceReport.from_json(json.loads(json.dumps(again.to_json()))))
    report = finish_run(plan, reports, index=index, sparse_encoder=Bm25Encoder())

    assert snapshot(index) == snapshot(expected_index)
    for name in ("documents", "chunks", "documents_changed", "verified", "unchanged", "deleted"):
        assert getattr(report, name) == getattr(expected, name), name
    assert sorted(report.changed_documents) == sorted(expected.changed_documents)
    assert report.embedded < expected.embedded


def test_slice_reports_survive_json(open_index: Any) -> None:
    index = open_index("i")
    run(index, corpus(2))
    report = run(index, [doc(0, revision="b"), doc(1)], slice_size=1)
    assert report.documents_changed == 1
    plan = prepare_run(
        [doc(0, revision="c")],
        policy=POLICY,
        embedder=HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
    )
    written = ingest_slice(
        [doc(0, revision="c")],
        plan.slice_context(),
        policy=POLICY,
        embedder=HashingEmbedder(),
        sparse_encoder=Bm25Encoder(),
        index=index,
    )
    assert written.deleted > 0 and written.embedded > 0
    assert SliceReport.from_json(json.loads(json.dumps(written.to_json()))) == written


def test_a_one_shot_iterator_is_refused_before_anything_is_read(open_index: Any) -> None:
    documents = iter(corpus(2))
    with pytest.raises(TypeError, match="re-iterable"):
        run(open_index("i"), documents)
    assert len(list(documents)) == 2


def live_documents(index: EdgeIndex) -> set[str]:
    live = PointFilter(must=(FieldMatch("index_state", ("live",)),))
    return {str(p.payload["document_id"]) for p in index.scroll(live)}


def test_a_failed_call_lets_the_slices_already_staged_switch_and_a_rerun_converges(
    open_index: Any,
) -> None:
    documents = corpus(8)  # slices of 2 documents, 2 calls each
    failing = SlowEmbedder(in_flight=2, delay=0.0, fail_after_calls=4)
    index = open_index("i")
    with pytest.raises(RuntimeError, match="scripted"):
        run(index, documents, failing, batch_size=2, slice_size=2)
    # The slices already staged when the third one's call failed are switched, as they
    # would have been one slice after another; nothing after them is live. How many the
    # writer had staged by then depends on its pace beside the embedding calls (on a
    # loaded machine only the first, or none yet): whole slices, in order, never the
    # failed one.
    live = live_documents(index)
    assert live in (
        set(),
        {"doc-000", "doc-001"},
        {"doc-000", "doc-001", "doc-002", "doc-003"},
    ), live
    staged = index.count(PointFilter(must=(FieldMatch("index_state", ("staged",)),)))
    switched = index.count(PointFilter(must=(FieldMatch("index_state", ("live",)),)))
    again = run(index, documents, HashingEmbedder(), batch_size=2, slice_size=2)
    # The rerun keeps the switched slices' chunks as they are, reuses the vectors of the
    # chunks left staged, and embeds only the rest (each document has 2 chunks).
    assert switched == 2 * len(live)
    assert again.chunks == 16
    assert (again.unchanged, again.embedded) == (switched, 16 - switched - staged)
    clean = run(open_index("clean"), documents, HashingEmbedder(), batch_size=2)
    assert snapshot(index) == snapshot(open_index("clean"))
    assert (again.chunks, again.documents) == (clean.chunks, clean.documents)


class FailingWrites(RecordingIndex):
    """An index whose ``fail_at``-th upsert fails; records every write after it."""

    def __init__(self, inner: EdgeIndex, fail_at: int) -> None:
        super().__init__(inner)
        self.upserts = 0
        self.fail_at = fail_at
        self.after_failure: list[str] = []

    def upsert(self, points: Any) -> None:
        self.upserts += 1
        if self.upserts == self.fail_at:
            raise ReadBackError("p", "scripted write failure")
        if self.upserts > self.fail_at:
            self.after_failure.append("upsert")
        self.inner.upsert(points)

    def set_payload(self, *args: Any) -> None:
        if self.upserts >= self.fail_at:
            self.after_failure.append("set_payload")
        self.inner.set_payload(*args)


@pytest.mark.parametrize("atomic", [True, False])
def test_a_failed_write_stops_every_write_after_it_and_its_slice_never_switches(
    open_index: Any, atomic: bool
) -> None:
    index = FailingWrites(open_index("i"), fail_at=2)
    index.atomic_upsert = atomic
    embedder = SlowEmbedder(in_flight=4, delay=0.01)
    with pytest.raises(ReadBackError, match="scripted"):
        run(index, corpus(8), embedder, batch_size=2, slice_size=2)
    assert index.after_failure == []
    if atomic:  # one upsert a slice of new documents: the second slice's fails
        assert live_documents(index.inner) == {"doc-000", "doc-001"}
    else:  # the first slice's second staged batch fails: it never switches
        assert live_documents(index.inner) == set()


def test_an_id_in_two_tenants_is_reported_shared_as_one_slice_after_another_would(
    open_index: Any,
) -> None:
    """The later tenant's slice is planned while the earlier one's call is still out:
    the earlier document is not written yet, and still counts as held."""
    faqs = [dataclasses.replace(doc(0), document_id="faq", tenant=t) for t in ("acme", "globex")]
    embedder = SlowEmbedder(in_flight=1, delay=0.05)
    report = run(open_index("i"), faqs, embedder, slice_size=1)
    assert [(s.document_id, s.tenant, s.other_tenants) for s in report.shared_ids] == [
        ("faq", "globex", ("acme",))
    ]


def test_no_embedding_call_starts_once_the_runs_deadline_passed(open_index: Any) -> None:
    """Also for an embedder that spends no deadline itself (the bundled model): the
    pass stops before its next call."""
    embedder = SlowEmbedder(in_flight=2, delay=0.0)
    index = open_index("i")
    with (
        deadline_bound(Deadline(0.0, clock=lambda: 1.0)),
        pytest.raises(EmbeddingProviderError) as caught,
    ):
        run(index, corpus(4), embedder)
    assert caught.value.category is FailureCategory.DEADLINE_EXHAUSTED
    assert embedder.calls == [] and index.count() == 0


@dataclasses.dataclass
class PausedEmbedder(HashingEmbedder):
    """Waits in its first call until ``release`` is set (a worker that stalled after
    planning its slice: a long pause, a lost lease); ``entered`` says it got there."""

    release: threading.Event = dataclasses.field(default_factory=threading.Event)
    entered: threading.Event = dataclasses.field(default_factory=threading.Event)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        self.release.wait(timeout=60)
        return super().embed_documents(texts)


@dataclasses.dataclass
class PausedThenFailing(PausedEmbedder):
    """A :class:`PausedEmbedder` whose second call fails."""

    calls_made: int = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls_made += 1
        if self.calls_made == 2:
            raise KeyboardInterrupt("worker A killed while embedding")
        return super().embed_documents(texts)


@pytest.mark.parametrize(
    ("atomic", "dies"),
    [
        (False, "staged"),  # stages its points, dies before switching
        (True, "live"),  # writes its new documents live, dies before reading them back
        (True, "embedding"),  # fails embedding: stages the points it embedded, then dies
    ],
)
def test_a_late_attempt_at_a_slice_leaves_the_points_another_attempt_switched_live(
    open_index: Any, atomic: bool, dies: str
) -> None:
    """Worker A plans the slice and stalls; worker B runs the same slice to the end;
    A wakes up, writes what it has and dies. B's points stay live: A never stages a point
    that is already live with its plan's digest."""
    inner = open_index("i")
    index = RecordingIndex(inner)
    index.atomic_upsert = atomic
    documents = corpus(3)
    common: dict[str, Any] = {"policy": POLICY, "sparse_encoder": Bm25Encoder(), "index": index}
    plan = prepare_run(documents, embedder=HashingEmbedder(), **common)
    late = PausedThenFailing() if dies == "embedding" else PausedEmbedder()
    if dies == "embedding":
        common["batch_size"] = 2

    def dies_before_switching(_document_id: str, phase: str) -> None:
        if phase == dies:
            raise KeyboardInterrupt("worker A killed")

    died: list[BaseException] = []

    def worker_a() -> None:
        try:
            ingest_slice(
                documents,
                plan.slice_context(),
                embedder=late,
                phase_hook=dies_before_switching,
                **common,
            )
        except BaseException as error:
            died.append(error)

    a = threading.Thread(target=worker_a)
    a.start()
    assert late.entered.wait(timeout=60)  # A has scanned the slice and is embedding
    report = ingest_slice(documents, plan.slice_context(), embedder=HashingEmbedder(), **common)
    late.release.set()
    a.join(timeout=60)
    assert [type(error) for error in died] == [KeyboardInterrupt]
    live = index.count(PointFilter(must=(FieldMatch("index_state", ("live",)),)))
    assert (live, index.count()) == (report.chunks, report.chunks)
    if dies == "embedding":
        assert late.calls_made == 2  # A had embedded a batch to stage when it failed


class TamperedReads(RecordingIndex):
    """An index whose reads return every text changed (an engine that stored wrong)."""

    def retrieve(self, ids: Any, **kw: Any) -> Any:
        return [
            dataclasses.replace(p, payload={**p.payload, "text": "tampered"})
            if "text" in p.payload
            else p
            for p in self.inner.retrieve(ids, **kw)
        ]


@pytest.mark.parametrize("atomic", [True, False])
def test_a_read_back_that_disagrees_leaves_nothing_visible(open_index: Any, atomic: bool) -> None:
    index = TamperedReads(open_index("i"))
    index.atomic_upsert = atomic
    with pytest.raises(ReadBackError, match="'text' differs"):
        run(index, corpus(4))
    # Written live: deleted again before the error. Staged: never switched.
    assert live_documents(index.inner) == set()
    if atomic:
        assert index.inner.count() == 0
    else:
        assert index.inner.count() > 0  # the staged batch that failed stays staged


class PartialUpsert(RecordingIndex):
    """An index whose upserts apply their first half, then fail (an engine error)."""

    def upsert(self, points: Any) -> None:
        self.inner.upsert(points[: len(points) // 2])
        raise OSError(28, "scripted: no space left on device")


def test_an_upsert_that_fails_halfway_leaves_no_new_document_visible(open_index: Any) -> None:
    index = PartialUpsert(open_index("i"))
    with pytest.raises(OSError, match="scripted"):
        run(index, corpus(4))
    assert index.inner.count() == 0  # the applied half was deleted before the error

"""One process holds the embedded index and answers queries while it ingests (issue:
"A query during an ingestion answers from the previous or the new revision of each
document - never fails, never mixes").

Everything goes through ``Application`` over the real embedded index and real BM25, with
the hashing embedder. Every paragraph carries its revision's marker (``rev-a``,
``rev-b``), so a hit's text says which revision it came from.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ragwright.application import Application, IngestRequest, SearchRequest
from ragwright.application.requests.corpus import ChunkingOptions
from ragwright.errors import ContractMismatch, IndexBusy, IndexDamaged, IndexNotFound, RequestError
from ragwright.protocols import VectorIndex
from ragwright.types import PointFilter, StoredPoint
from tests.application.components import FakeComponents, fake_application

DOCUMENTS = 40
SECTIONS = ("Drain", "Restart", "Verify")
CHUNKS = DOCUMENTS * len(SECTIONS)  # one chunk per section (well under 80 words)
GENERIC = "drain the queue and restart the worker after the deadline"


def write_corpus(root: Path, marker: str) -> Path:
    """``DOCUMENTS`` runbooks, three sections each, every paragraph naming its document
    (``serviceNN``) and carrying ``marker``."""
    root.mkdir(parents=True, exist_ok=True)
    for number in range(DOCUMENTS):
        name = f"service{number:02d}"
        sections = "".join(
            f"## {heading}\n\n"
            f"{heading} {name} carefully: {marker} says drain the queue before you restart "
            f"the worker of {name}.\n\n"
            f"For {name} the {marker} deadline is {number + 1} minutes; verify the worker "
            "after the restart and keep the queue drained.\n\n"
            for heading in SECTIONS
        )
        (root / f"{name}.md").write_text(
            "---\ndocument_type: runbook\npublication_state: published\n---\n"
            f"# Runbook {name}\n\n{sections}",
            "utf-8",
        )
    return root


class SlowDenseIndex:
    """An index whose dense search takes a few milliseconds longer, as on a large
    collection: a switch between a query's two legs then really happens unless the legs
    read one state. Every other call goes to ``inner``."""

    def __init__(self, inner: VectorIndex, delay: float) -> None:
        self._inner = inner
        self._delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def search(
        self, vector: Sequence[float], point_filter: PointFilter, *, limit: int
    ) -> list[StoredPoint]:
        found = self._inner.search(vector, point_filter, limit=limit)
        time.sleep(self._delay)
        return found

    def reading(self) -> AbstractContextManager[object]:
        return self._inner.reading()

    def close(self) -> None:
        self._inner.close()


class SlowQueryComponents(FakeComponents):
    """The test components, with readers' dense searches slowed (writers untouched)."""

    delay = 0.005

    def open_index(self, chunking_version: str, **options: Any) -> VectorIndex:
        index = super().open_index(chunking_version, **options)
        if options.get("write"):
            return index
        return SlowDenseIndex(index, self.delay)  # type: ignore[return-value]


@dataclass
class Observed:
    """What the readers saw: one row per completed search, and every failure."""

    rows: list[tuple[float, float, dict[str, set[str]], dict[str, set[str]]]] = field(
        default_factory=list
    )
    statuses: int = 0
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def markers(text: str) -> set[str]:
    return {m for m in ("rev-a", "rev-b") if m in text}


def search_rows(app: Application, question: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per document in one response: the markers of its hits' texts and their revisions."""
    result = app.search(SearchRequest(question, k=12))
    texts: dict[str, set[str]] = {}
    revisions: dict[str, set[str]] = {}
    for hit in result.hits:
        texts.setdefault(hit.document_id, set()).update(markers(hit.text))
        revisions.setdefault(hit.document_id, set()).add(hit.revision)
    return texts, revisions


def read_until(
    app: Application, done: threading.Event, seen: Observed, switched: list[float]
) -> None:
    """Search until ``done``, mostly for the document the run switches next (documents
    switch in file order, one ``switched`` event each), sometimes for all of them."""
    turn = 0
    while not done.is_set():
        turn += 1
        upcoming = min(len(switched), DOCUMENTS - 1)
        question = GENERIC if turn % 4 == 0 else f"restart service{upcoming:02d} worker"
        started = time.monotonic()
        try:
            texts, revisions = search_rows(app, question)
        except BaseException as error:
            with seen.lock:
                seen.errors.append(error)
            continue
        with seen.lock:
            seen.rows.append((started, time.monotonic(), texts, revisions))


def status_until(app: Application, done: threading.Event, seen: Observed) -> None:
    while not done.is_set():
        try:
            app.status()
        except BaseException as error:
            with seen.lock:
                seen.errors.append(error)
            continue
        with seen.lock:
            seen.statuses += 1
        time.sleep(0.01)  # a status now and then; the searches are what is measured


@pytest.fixture
def held_app(tmp_path: Path) -> Iterator[Application]:
    components = SlowQueryComponents(
        fake_application(tmp_path / "home", batch_size=8, hybrid_candidates=20)[1].settings
    )
    app = Application(components)
    with app.hold_index():
        yield app


def test_queries_during_an_ingestion_see_one_revision_per_document_and_never_fail(
    tmp_path: Path, held_app: Application
) -> None:
    app = held_app
    first = app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "a", "rev-a"),)))
    assert (first.embedded, first.chunks) == (CHUNKS, CHUNKS)
    revision_b = write_corpus(tmp_path / "b", "rev-b")
    switched: list[float] = []  # when each document's switch ended

    def slowly(event: str, _count: int) -> None:
        # A few milliseconds per batch and per document switch, so the run lasts long
        # enough for the readers to meet every phase of it.
        if event == "switched":
            switched.append(time.monotonic())
        if event in ("embedded", "switched"):
            time.sleep(0.02)

    done = threading.Event()
    seen = Observed()
    readers = [
        threading.Thread(target=read_until, args=(app, done, seen, switched)) for _ in range(3)
    ]
    readers.append(threading.Thread(target=status_until, args=(app, done, seen)))
    for thread in readers:
        thread.start()
    time.sleep(0.05)  # the readers are querying revision a before the run starts
    outcome: dict[str, Any] = {}

    def run_ingest() -> None:
        outcome["started"] = time.monotonic()
        try:
            outcome["result"] = app.ingest(IngestRequest(sources=(revision_b,)), progress=slowly)
        except BaseException as error:
            outcome["error"] = error
        outcome["ended"] = time.monotonic()

    writer = threading.Thread(target=run_ingest)
    writer.start()
    writer.join(timeout=120)
    time.sleep(0.05)  # and query revision b after it ended
    done.set()
    for thread in readers:
        thread.join(timeout=30)

    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].embedded == CHUNKS
    assert outcome["result"].deleted == CHUNKS
    assert seen.errors == []
    # Never a mix: all hits of one document in one response are one revision.
    for _, _, texts, revisions in seen.rows:
        for document_id in texts:
            assert len(texts[document_id]) == 1, (document_id, texts[document_id])
            assert len(revisions[document_id]) == 1, (document_id, revisions[document_id])
    # The readers overlapped the run, its switch phase included.
    started, ended = outcome["started"], outcome["ended"]
    during = [row for row in seen.rows if started <= row[0] and row[1] <= ended]
    switching = [row for row in during if switched[0] <= row[0] and row[1] <= switched[-1]]
    assert len(during) >= 20
    assert len(switching) >= 10
    assert any("rev-a" in set().union(*row[2].values()) for row in during)
    # Some response saw documents already switched beside documents not yet switched.
    assert any({"rev-a", "rev-b"} <= set().union(*row[2].values()) for row in switching), (
        "no response saw the run mid-switch"
    )
    assert seen.statuses > 0
    # Once it ended, every document answers from revision b only.
    for question in (GENERIC, "restart service07 worker", "restart service31 worker"):
        texts, _ = search_rows(app, question)
        assert texts and set().union(*texts.values()) == {"rev-b"}
    assert app.status().points == {"live": CHUNKS}


def test_held_ingestion_commits_so_a_fresh_open_verifies_clean(tmp_path: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    manifest = components.settings.index_path / "manifest.json"
    with app.hold_index():
        app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "a", "rev-a"),)))
        # Committed when the ingestion's view closed, while the index stays open.
        committed = json.loads(manifest.read_text("utf-8"))
        assert (committed["state"], committed["points"]) == ("clean", CHUNKS)
        assert app.verify().committed_points == CHUNKS
        app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "b", "rev-b"),)))
        assert json.loads(manifest.read_text("utf-8"))["state"] == "clean"
        assert app.search(SearchRequest(GENERIC)).hits
    # Held mode off: every use opens the index again, verifying it against the manifest.
    result = app.verify()
    assert (result.committed_points, result.points, result.checked) == (CHUNKS, CHUNKS, CHUNKS)
    assert not result.damaged
    texts, _ = search_rows(app, GENERIC)
    assert set().union(*texts.values()) == {"rev-b"}


def test_without_held_mode_a_query_during_a_write_session_is_busy(tmp_path: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "a", "rev-a"),)))
    version = app.chunking_policy().version
    ingesting = components.open_index(version, write=True)
    try:
        with pytest.raises(IndexBusy, match="in use by another process"):
            app.search(SearchRequest(GENERIC))
    finally:
        ingesting.close()
    with app.hold_index():
        ingesting = components.open_index(version, write=True)
        try:
            assert app.search(SearchRequest(GENERIC)).hits
            assert app.status().points == {"live": CHUNKS}
        finally:
            ingesting.close()


def test_held_mode_creates_the_index_on_the_first_ingestion_and_reports_it(
    tmp_path: Path,
) -> None:
    app, components = fake_application(tmp_path / "home")
    with app.hold_index():
        with pytest.raises(IndexNotFound):
            app.search(SearchRequest(GENERIC))
        absent = app.index_state()
        assert (absent.held, absent.opened, absent.error) == (True, False, "IndexNotFound")
        assert not components.settings.index_path.exists()
        app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "a", "rev-a"),)))
        state = app.index_state()
        assert (state.opened, state.points, state.committed_points) == (True, CHUNKS, CHUNKS)
        assert (state.writing, state.reason, state.error) == (False, None, None)
        assert state.location == str(components.settings.index_path)
    closed = app.index_state()
    assert (closed.held, closed.opened, closed.points) == (False, True, CHUNKS)


def test_held_mode_refuses_a_rebuild_and_a_second_ingestion(tmp_path: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    corpus = write_corpus(tmp_path / "a", "rev-a")
    with app.hold_index():
        app.ingest(IngestRequest(sources=(corpus,)))
        with pytest.raises(RequestError) as refused:
            app.ingest(IngestRequest(sources=(corpus,), rebuild=True))
        assert refused.value.field == "rebuild"
        assert "stop the service" in str(refused.value)
        ingesting = components.open_index(app.chunking_policy().version, write=True)
        try:
            with pytest.raises(IndexBusy, match="another ingestion in this process"):
                app.ingest(IngestRequest(sources=(corpus,)))
            assert app.search(SearchRequest(GENERIC)).hits  # readers are not held up
        finally:
            ingesting.close()
        assert app.ingest(IngestRequest(sources=(corpus,))).unchanged == CHUNKS
        assert app.status().points == {"live": CHUNKS}


def test_held_mode_adds_a_chunking_version_only_with_consent(tmp_path: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    corpus = write_corpus(tmp_path / "a", "rev-a")
    other = ChunkingOptions(max_words=40)
    with app.hold_index():
        app.ingest(IngestRequest(sources=(corpus,)))
        with pytest.raises(ContractMismatch) as refused:
            app.ingest(IngestRequest(sources=(corpus,), chunking=other))
        assert refused.value.field == "chunking_versions"
        app.ingest(IngestRequest(sources=(corpus,), chunking=other, add_chunking_version=True))
        versions = [v.chunking_version for v in app.status().versions]
    stored = json.loads((components.settings.index_path / "contract.json").read_text("utf-8"))
    assert sorted(stored["chunking_versions"]) == versions
    assert app.chunking_policy(other).version in versions and len(versions) == 2


def test_a_damaged_index_is_a_reason_in_the_state_not_a_crash(tmp_path: Path) -> None:
    app, components = fake_application(tmp_path / "home")
    app.ingest(IngestRequest(sources=(write_corpus(tmp_path / "a", "rev-a"),)))
    (components.settings.index_path / "contract.json").write_text("{garbled", "utf-8")
    with app.hold_index():
        state = app.index_state()
        assert (state.opened, state.error) == (False, "IndexDamaged")
        assert state.reason is not None and "contract.json" in state.reason
        assert "\n" not in state.reason
        with pytest.raises(IndexDamaged):
            app.search(SearchRequest(GENERIC))
        assert app.index_state().error == "IndexDamaged"  # asked again, still a reason

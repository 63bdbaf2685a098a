"""The BM25 encoder's analysis under threads: a queued-ingestion worker runs two items at
once and the service searches from several threads, all through one encoder."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator

import pytest
import snowballstemmer

from ragwright.adapters.lexical import Bm25Encoder
from tests.conftest import SAMPLES

SUFFIXES = ("", "s", "ing", "ed", "ness", "ational", "fulness", "ively", "ization")


def vocabulary() -> list[str]:
    """Distinct words of the sample corpus with suffixes the stemmer strips, so each
    thread stems many words it has not seen (a cached word never reaches the stemmer)."""
    words = sorted(
        {
            w
            for path in SAMPLES.rglob("*.md")
            for w in re.findall(r"[a-z]{4,}", path.read_text().lower())
        }
    )
    return [word + suffix for word in words for suffix in SUFFIXES]


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


snowball = snowballstemmer.stemmer("english")


def test_threads_analysing_at_once_get_the_stems_one_thread_gets(frequent_switches: None) -> None:
    words = vocabulary()
    assert len(words) > 2_000
    alone = Bm25Encoder()
    expected = {word: alone.terms(word) for word in words}
    # The words reach the stemmer (stop words would give no term to compare).
    assert sum(terms == [snowball.stemWord(w)] for w, terms in expected.items()) > 2_000
    encoder = Bm25Encoder()
    threads = 4
    slices = [words[i::threads] for i in range(threads)]
    got: list[dict[str, list[str]]] = [{} for _ in range(threads)]

    def analyse(i: int) -> None:
        for word in slices[i]:
            got[i][word] = encoder.terms(word)

    workers = [threading.Thread(target=analyse, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    wrong = {
        word: terms for results in got for word, terms in results.items() if terms != expected[word]
    }
    assert wrong == {}, list(wrong.items())[:5]
    # Whatever a thread cached is right too: the next call answers from the cache.
    assert all(encoder.terms(word) == expected[word] for word in words[:500])

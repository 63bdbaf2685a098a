"""The TokenCounter suite on the o200k_base counter and the word counter."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragwright.adapters.tokenizer import O200kCounter
from ragwright.testing import TokenCounterConformance, WordCounter


@pytest.fixture(scope="module")
def o200k(tmp_path_factory: pytest.TempPathFactory) -> O200kCounter:
    return O200kCounter(Path(tmp_path_factory.mktemp("tokenizers")))


class TestO200kCounter(TokenCounterConformance):
    @pytest.fixture
    def counter(self, o200k: O200kCounter) -> O200kCounter:
        return o200k


class TestWordCounter(TokenCounterConformance):
    @pytest.fixture
    def counter(self) -> WordCounter:
        return WordCounter()

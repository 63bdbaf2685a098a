"""Fakes and conformance suites shipped with the package, for our tests and yours.

Every public name is importable from here (``from ragwright.testing import
ScriptedChatModel, HashingEmbedder``). The fakes need nothing beyond ragwright itself.
The conformance suites are pytest test classes and need the ``testing`` extra
(``pip install 'ragwright[testing]'``); they are imported on first use, so the fakes
work without pytest and a suite without it fails with an error naming the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragwright.testing.fakes import HASHING_PROFILE, HashingEmbedder, ManualClock, WordCounter
from ragwright.testing.scripted import Fail, Hang, Reply, ScriptedChatModel, Step, Stream

if TYPE_CHECKING:
    from ragwright.testing.conformance import (
        CacheStoreConformance,
        CapacityPoolConformance,
        ChatModelConformance,
        EmbedderConformance,
        RerankerConformance,
        TokenCounterConformance,
        VectorIndexConformance,
    )

_SUITES = frozenset(
    {
        "CacheStoreConformance",
        "CapacityPoolConformance",
        "ChatModelConformance",
        "EmbedderConformance",
        "RerankerConformance",
        "TokenCounterConformance",
        "VectorIndexConformance",
    }
)

__all__ = [
    "HASHING_PROFILE",
    "CacheStoreConformance",
    "CapacityPoolConformance",
    "ChatModelConformance",
    "EmbedderConformance",
    "Fail",
    "Hang",
    "HashingEmbedder",
    "ManualClock",
    "Reply",
    "RerankerConformance",
    "ScriptedChatModel",
    "Step",
    "Stream",
    "TokenCounterConformance",
    "VectorIndexConformance",
    "WordCounter",
]


def __getattr__(name: str) -> Any:
    # PEP 562: the suites import pytest, so they load only when someone asks for one.
    if name in _SUITES:
        return getattr(importlib.import_module("ragwright.testing.conformance"), name)
    raise AttributeError(f"module 'ragwright.testing' has no attribute {name!r}")

"""Conformance suites: a protocol's documented contract, written as pytest test classes.

Subclass a suite in a test module and provide what it asks for (a fixture or a factory
method, named in the suite's docstring); pytest collects the inherited tests. Run the
same suite on every implementation of the protocol. The suites need pytest, which the
``testing`` extra installs (``pip install 'ragwright[testing]'``).
"""

from __future__ import annotations

import importlib

try:
    importlib.import_module("pytest")
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        "ragwright.testing's conformance suites are pytest test classes and need pytest; "
        "install the 'testing' extra: pip install 'ragwright[testing]'",
        name="pytest",
    ) from missing

from ragwright.testing.conformance.chat import ChatModelConformance
from ragwright.testing.conformance.index import VERSION, VectorIndexConformance
from ragwright.testing.conformance.models import (
    EmbedderConformance,
    RerankerConformance,
    TokenCounterConformance,
)
from ragwright.testing.conformance.stores import CacheStoreConformance, CapacityPoolConformance

__all__ = [
    "VERSION",
    "CacheStoreConformance",
    "CapacityPoolConformance",
    "ChatModelConformance",
    "EmbedderConformance",
    "RerankerConformance",
    "TokenCounterConformance",
    "VectorIndexConformance",
]

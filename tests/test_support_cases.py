"""The support check's labelled set and the committed calibration record agree with the code."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from types import ModuleType

from ragwright.core.support import check_support
from tests.conftest import REPO


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "support_check", REPO / "benchmarks" / "support_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_labelled_set_has_both_labels_in_both_splits_and_every_cited_chunk_exists() -> None:
    bench = _benchmark()
    cases = bench.load_cases()  # raises KeyError for a cited chunk the corpus lacks
    assert len(cases) >= 60
    for split in ("tune", "test"):
        labels = {c.supported for c in cases if bench.split_of(c.id) == split}
        assert labels == {True, False}, split


def test_the_split_is_fixed_by_the_first_byte_of_the_ids_sha256() -> None:
    bench = _benchmark()
    # SHA-256 of "s01" starts with byte 0xfb (odd), of "u01" with 0x20 (even).
    assert [bench.split_of(i) for i in ("s01", "u01")] == ["test", "tune"]


def test_the_committed_record_matches_the_current_defaults_and_decisions() -> None:
    bench = _benchmark()
    record = json.loads((REPO / "benchmarks" / "results" / "support_check.json").read_text())
    parameters = inspect.signature(check_support).parameters
    defaults = (parameters["min_shared"].default, parameters["min_coverage"].default)
    assert (
        record["current_defaults"]["min_shared"],
        record["current_defaults"]["min_coverage"],
    ) == defaults
    column = next(
        f"withheld_{name}"
        for name in ("chosen", "hand_defaults")
        if (record[name]["min_shared"], record[name]["min_coverage"]) == defaults
    )
    cases = {c.id: c for c in bench.load_cases()}
    assert sorted(cases) == sorted(row["id"] for row in record["rows"])
    for row in record["rows"]:
        assert bench.withheld(cases[row["id"]], *defaults) is row[column], row["id"]

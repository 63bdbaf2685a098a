"""``benchmarks/payload_layout.py`` on a few points (issue 25).

The benchmark compares the write path's cost for the payload the product writes with
other layouts of the same information; the comparison is only worth something if the
points are the product's own and the packed layout loses nothing. This runs it as a
user does, on 1,500 points a layout (a few seconds), and checks what it reports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.processes import CHILD_TIMEOUT

from ragwright.core.points import KEYWORD_INDEX_FIELDS, REQUIRED_STRING_FIELDS


def test_the_layout_benchmark_writes_the_products_points_in_each_layout(tmp_path: Path) -> None:
    out = tmp_path / "layout.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "payload_layout.py"),
            *("--points", "1500", "--rounds", "1", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text("utf-8"))
    layouts = result["layouts"]
    assert list(layouts) == ["as_written", "packed", "filter_fields", "none"]
    written, packed = layouts["as_written"], layouts["packed"]
    # The product's payload: every required string field plus the indexed ones.
    assert written["string_values"] >= len(set(REQUIRED_STRING_FIELDS) | {"index_state"})
    # Packed: the filter and read-back fields stay, the rest becomes one string (the
    # child refuses to run when it does not unpack to the written payload).
    assert packed["payload_fields"] < written["payload_fields"]
    assert packed["string_values"] < written["string_values"]
    assert layouts["filter_fields"]["payload_fields"] <= len(KEYWORD_INDEX_FIELDS) + 1
    assert layouts["none"]["payload_fields"] == 0
    assert written["total_over_as_written"] == 1.0
    for row in layouts.values():
        assert row["total_us"] == round(row["convert_us"] + row["update_us"] + row["seal_us"], 1)
        assert row["update_us"] > 0
    costs = result["convert_us_per_value"]
    assert set(costs) == {"bool", "int", "float", "str", "list of 3 ints", "object"}
    share = result["other_thread_while_engine_runs"]
    assert set(share) == {"during_update", "during_seal"}

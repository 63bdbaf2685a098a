from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; fails (never skips) with a clear message if absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"shared benchmark data missing: {path} (see ../shared/data/README.md)")
    return path


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No test reads the developer's environment or a ragwright.toml in the checkout.
    import os

    for name in list(os.environ):
        if name.startswith("RAGWRIGHT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

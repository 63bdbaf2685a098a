"""The compact key set an ingestion run keeps per document: exact membership, and 16
bytes a key once merged."""

from __future__ import annotations

import pytest

from ragwright.core import keysets
from ragwright.core.keysets import KeySet


@pytest.fixture(autouse=True)
def small_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    # Merge every 100 additions, so the sorted columns and the recent set both hold keys.
    monkeypatch.setattr(keysets, "_MERGE_AT", 100)


def test_every_added_key_is_held_and_no_other() -> None:
    keys = KeySet()
    added = [(None if n % 3 else f"tenant{n % 5}", f"doc-{n}") for n in range(1_050)]
    assert all(keys.add(tenant, name) for tenant, name in added)
    assert len(keys) == len(added)
    assert all(key in keys for key in added)
    # The same names under another tenant, untenanted vs the empty tenant, unknown ids.
    assert ("tenant9", "doc-1") not in keys
    assert ("", "doc-1") not in keys
    assert (None, "doc-0") not in keys  # doc-0 is tenant0's
    assert (None, "doc-1050") not in keys
    assert "doc-1" not in keys  # not a key at all


def test_adding_a_key_again_is_refused_whether_it_was_merged_or_recent() -> None:
    keys = KeySet()
    for n in range(250):
        keys.add("acme", f"doc-{n}")
    assert keys.nbytes() == 200 * 16  # two merges: 200 keys in the columns, 16 bytes each
    assert not keys.add("acme", "doc-3")  # merged
    assert not keys.add("acme", "doc-240")  # recent
    assert keys.add("globex", "doc-3")
    assert len(keys) == 251


def test_a_key_set_cannot_be_listed() -> None:
    with pytest.raises(TypeError, match="cannot list keys"):
        list(KeySet())


def test_keys_whose_first_halves_collide_are_told_apart_by_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = keysets.key_digest
    monkeypatch.setattr(keysets, "key_digest", lambda t, n: (7, real(t, n)[1]))
    keys = KeySet()
    for n in range(150):  # one merge: colliding keys in the columns and in the recent set
        keys.add(None, f"doc-{n}")
    assert all((None, f"doc-{n}") in keys for n in range(150))
    assert (None, "doc-150") not in keys and not keys.add(None, "doc-20")

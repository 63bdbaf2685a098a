"""A set of document keys in 16 bytes each, for state a run keeps per document.

An ingestion run must remember every document it read (the duplicate check, prune's "not
in this run", the changed documents the writing pass processes) while holding nothing
else of them. As Python tuples of strings in a set or dict that is some 300 bytes a key,
several hundred MB for a million documents; here a key is a 128-bit digest kept as two
unsigned 64-bit halves in sorted ``array`` columns (plus a small set of recent
additions, merged in bulk), so a million keys take 16 MB. No library offers a compact
exact membership set in memory, and core is standard library only, hence this module.

Exactness: the digest is BLAKE2b of the key's unambiguous encoding, so two different
keys share one with probability about n^2 / 2^129 (10^-27 for a million keys):
membership is exact in practice.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
from array import array
from collections.abc import Iterator

_MERGE_AT = 16_384
"""Recent additions kept in a Python set before one merge into the sorted columns
(each costs some 150 bytes there, so this bounds them to about 2.5 MB)."""


def key_digest(tenant: str | None, name: str) -> tuple[int, int]:
    """The two 64-bit halves of the key's digest; ``None`` and ``""`` differ."""
    encoded = (
        (
            b"\x00"
            if tenant is None
            else b"\x01" + str(len(tenant)).encode() + b":" + tenant.encode()
        )
        + b"\x1f"
        + name.encode()
    )
    digest = hashlib.blake2b(encoded, digest_size=16).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")


class KeySet:
    """An add-only set of (tenant, name) keys, 16 bytes a key (see the module)."""

    __slots__ = ("_high", "_low", "_recent")

    def __init__(self) -> None:
        self._high = array("Q")
        self._low = array("Q")
        self._recent: set[tuple[int, int]] = set()

    def add(self, tenant: str | None, name: str) -> bool:
        """Record the key; ``False`` when it was already there."""
        digest = key_digest(tenant, name)
        if self._holds(digest):
            return False
        self._recent.add(digest)
        if len(self._recent) >= _MERGE_AT:
            self._merge()
        return True

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 2):
            return False
        tenant, name = key
        return self._holds(key_digest(tenant, name))

    def __len__(self) -> int:
        return len(self._high) + len(self._recent)

    def __bool__(self) -> bool:
        return len(self) > 0

    def _holds(self, digest: tuple[int, int]) -> bool:
        if digest in self._recent:
            return True
        high, low = digest
        at = bisect.bisect_left(self._high, high)
        while at < len(self._high) and self._high[at] == high:
            if self._low[at] == low:
                return True
            at += 1
        return False

    def _merge(self) -> None:
        # A streaming merge of two sorted runs: no list of every key on the way.
        merged = heapq.merge(zip(self._high, self._low, strict=True), sorted(self._recent))
        high, low = array("Q"), array("Q")
        for digest_high, digest_low in merged:
            high.append(digest_high)
            low.append(digest_low)
        self._high, self._low, self._recent = high, low, set()

    def __iter__(self) -> Iterator[tuple[int, int]]:
        raise TypeError("a KeySet holds digests: it answers membership, it cannot list keys")

    def nbytes(self) -> int:
        """Bytes the merged keys take (recent additions not counted)."""
        return (len(self._high) + len(self._low)) * self._high.itemsize

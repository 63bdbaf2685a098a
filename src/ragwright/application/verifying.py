"""``verify``: read every point of the collection back and list what does not read."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

from ragwright.application.components import OpenIndex
from ragwright.application.requests.corpus import VerifyProblem, VerifyRequest, VerifyResult
from ragwright.core.points import read_payload
from ragwright.errors import IndexDamaged, PayloadError
from ragwright.protocols import IndexPart, SparseEncoder, VectorIndex

# Points read back per request by ``verify``.
VERIFY_PAGE = 256

_PARTS: tuple[IndexPart, ...] = ("payload", "dense", "sparse")


class Verification:
    """Reads every point back: payload, dense and sparse vectors, and the count."""

    def __init__(
        self,
        collection: str,
        *,
        open_index: OpenIndex,
        sparse_encoder: Callable[[], SparseEncoder],
        chunking_version: Callable[[], str],
    ) -> None:
        self.collection = collection
        self._open_index = open_index
        self._sparse_encoder = sparse_encoder
        self._chunking_version = chunking_version

    def verify(self, request: VerifyRequest | None = None) -> VerifyResult:
        """Read every point back: payload (validated as queries read it), dense vector
        (the contract's size, finite values) and sparse vector (present when the text
        has terms), and compare the count with the one last committed."""
        index = self._open_index(
            self._chunking_version(), write=False, any_chunking_version=True, verify=False
        )
        try:
            with index.reading():  # no write of this process between the two
                committed = index.committed_points
                held = index.count()
            ids = [point.point_id for point in index.scroll(payload_fields=())]
            problems: list[VerifyProblem] = []
            if committed is not None and held != committed:
                problems.append(
                    VerifyProblem(
                        None, "id tracker", f"{held} points readable, {committed} committed"
                    )
                )
            checked = 0
            for start in range(0, len(ids), VERIFY_PAGE):
                page = ids[start : start + VERIFY_PAGE]
                checked += self._verify_page(index, page, problems)
        finally:
            index.close()
        return VerifyResult(
            collection=self.collection,
            committed_points=committed,
            points=held,
            checked=checked,
            problems=tuple(problems),
        )

    def _verify_page(
        self, index: VectorIndex, page: list[uuid.UUID], problems: list[VerifyProblem]
    ) -> int:
        parts = {part: _read_part(index, page, part, problems) for part in _PARTS}
        dimensions = index.contract.dimensions
        terms = self._sparse_encoder().terms
        checked = 0
        for point_id in page:
            if any(point_id not in parts[part] for part in ("payload", "dense")):
                continue  # unreadable (already listed) or lost between scroll and read
            before = len(problems)
            try:
                payload = read_payload(point_id, parts["payload"][point_id])
            except PayloadError as error:
                problems.append(
                    VerifyProblem(str(point_id), "payload", f"{error.field} {error.rule}")
                )
                continue
            vector = parts["dense"][point_id]
            if len(vector) != dimensions or not all(map(math.isfinite, vector)):
                problems.append(
                    VerifyProblem(
                        str(point_id),
                        "dense vectors",
                        f"{len(vector)} values (expected {dimensions}) or a non-finite one",
                    )
                )
            if point_id not in parts["sparse"] and terms(payload.text):
                problems.append(VerifyProblem(str(point_id), "sparse vectors", "missing"))
            if len(problems) == before:
                checked += 1
        return checked


def _read_part(
    index: VectorIndex, page: list[uuid.UUID], part: IndexPart, problems: list[VerifyProblem]
) -> dict[uuid.UUID, Any]:
    """One part of a page of points; on a damaged read, point by point, so every
    unreadable point is listed and every readable one still checked."""
    try:
        return index.read_part(page, part)
    except IndexDamaged:
        found: dict[uuid.UUID, Any] = {}
        for point_id in page:
            try:
                found.update(index.read_part([point_id], part))
            except IndexDamaged as error:
                problems.append(VerifyProblem(str(point_id), error.part, error.detail))
        return found

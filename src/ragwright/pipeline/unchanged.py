"""Proving documents unchanged by counting, without reading a payload.

A re-run over an unchanged corpus used to read, for every slice of documents, the
stored payloads of all their points: the engine reads a point's whole payload (its text
included) whatever fields are asked, and that read was most of the re-run's time
(docs/ingestion.md, "Re-running over an unchanged corpus"). Every point written from a
plan carries ``change_key``, a hash of its document's key, source digest and chunk count
(:func:`ragwright.core.points.change_key`), in a keyword payload index. For one slice:

1. a facet over ``change_key`` of the slice's document ids, allowed to be approximate
   and cut to a few values a document, suggests each document's chunk count: the
   document's key under its current source digest and count ``n`` appears with ``n``
   points;
2. two exact counts decide. The live points carrying the suggested keys must number the
   sum of the suggested counts; so must every point of this chunking version under
   those document ids (in any state, any tenant). At most ``n`` points ever carry a key
   made with count ``n`` (one per chunk of that plan), so the first count holds only
   when every suggested document has all its chunks live under its current source
   digest, and the second only when nothing else is stored under their ids.

When the counts disagree (a hint was wrong, a document is partly written, another
tenant uses the same id, points were written before ``change_key`` existed), nothing is
proven and every document of the slice is scanned as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragwright.core.points import CHANGE_KEY, LIVE, change_key
from ragwright.pipeline.planning import DocumentKey, document_key
from ragwright.protocols import VectorIndex
from ragwright.types import FieldMatch, PointFilter, SourceDocument

# The hint keeps this many values a document of the slice (its most frequent): a
# document has one key a stored revision (one, or two while a change is half written),
# so only a collection keeping many versions of its documents loses hints to it, and a
# lost hint only means a scan.
HINT_VALUES_PER_DOCUMENT = 8


def proven_unchanged(
    index: VectorIndex,
    version: str,
    documents: Sequence[SourceDocument],
    digests: Sequence[str],
) -> dict[DocumentKey, int]:
    """(tenant, document id) → chunk count of the ``documents`` proven stored whole and
    live under their source digest (``digests``, in the same order); {} when the
    slice's counts prove nothing."""
    if not documents:
        return {}
    ids = tuple(sorted({d.document_id for d in documents}))
    # The hint is filtered by id alone (a second condition doubled its cost, measured):
    # values of other chunking versions never match a key made for this one.
    hint = index.facet(
        CHANGE_KEY,
        PointFilter(must=(FieldMatch("document_id", ids),)),
        exact=False,
        limit=HINT_VALUES_PER_DOCUMENT * len(ids),
    )
    if not hint:
        return {}
    sizes = sorted({n for n in hint.values() if n > 0})
    claimed: dict[DocumentKey, tuple[str, int]] = {}
    for document, source in zip(documents, digests, strict=True):
        for size in sizes:
            key = change_key(document.tenant, document.document_id, source, size)
            if hint.get(key) == size:
                claimed[document_key(document)] = (key, size)
                break
    if not claimed:
        return {}
    total = sum(size for _, size in claimed.values())
    # A key is made with the chunking version's source digest: no version condition.
    keys = tuple(sorted(key for key, _ in claimed.values()))
    live = PointFilter(must=(FieldMatch("index_state", (LIVE,)), FieldMatch(CHANGE_KEY, keys)))
    if index.count(live) != total:
        return {}
    owned = tuple(sorted({document_id for _, document_id in claimed}))
    chunking = FieldMatch("chunking_version", (version,))
    if index.count(PointFilter(must=(chunking, FieldMatch("document_id", owned)))) != total:
        return {}
    return {key: size for key, (_, size) in claimed.items()}

"""The collection contract: what every point in a collection was made with.

A collection binds one embedding profile (id and artifact digest), one vector size and
distance, the chunking versions written into it, and the BM25 profile. Opening a
collection with a different configuration stops with :class:`ContractMismatch` before
anything is read or written; a new chunking version is accepted only when the caller asks
for it. The collection's BM25 statistics (``lexical_stats``: counted points, their terms,
the ``avgdl`` the sparse vectors carry) ride along in the same metadata but are state kept
current by ingestion, so they are never compared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ragwright.core.lexical import LexicalProfile
from ragwright.errors import ContractMismatch
from ragwright.types import CollectionContract, EmbeddingProfile, LexicalStats

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"


def contract_for(
    profile: EmbeddingProfile, chunking_version: str, lexical: LexicalProfile | None = None
) -> CollectionContract:
    """The contract of a collection written with these profiles and chunking version."""
    return CollectionContract(
        vector_name=DENSE_VECTOR,
        dimensions=profile.dimensions,
        distance=profile.distance,
        profile_id=profile.profile_id,
        profile_digest=profile.artifact_digest,
        chunking_versions=(chunking_version,),
        sparse_vector_name=SPARSE_VECTOR,
        lexical_profile_id=(lexical or LexicalProfile()).profile_id,
    )


def contract_to_metadata(contract: CollectionContract) -> dict[str, Any]:
    """Plain JSON form, stored as collection metadata or in the sidecar file."""
    return {
        "vector_name": contract.vector_name,
        "dimensions": contract.dimensions,
        "distance": contract.distance,
        "embedding_profile_id": contract.profile_id,
        "embedding_profile_digest": contract.profile_digest,
        "chunking_versions": list(contract.chunking_versions),
        "sparse_vector_name": contract.sparse_vector_name,
        "lexical_profile_id": contract.lexical_profile_id,
        "lexical_stats": None
        if contract.lexical_stats is None
        else {
            "chunks": contract.lexical_stats.chunks,
            "terms": contract.lexical_stats.terms,
            "avgdl": contract.lexical_stats.avgdl,
        },
    }


def contract_from_metadata(metadata: Mapping[str, Any]) -> CollectionContract:
    """Parse stored metadata; a missing or malformed field is a contract mismatch."""
    try:
        stats = metadata.get("lexical_stats")
        return CollectionContract(
            vector_name=str(metadata["vector_name"]),
            dimensions=int(metadata["dimensions"]),
            distance=metadata["distance"],
            profile_id=str(metadata["embedding_profile_id"]),
            profile_digest=str(metadata["embedding_profile_digest"]),
            chunking_versions=tuple(str(v) for v in metadata["chunking_versions"]),
            sparse_vector_name=str(metadata["sparse_vector_name"]),
            lexical_profile_id=str(metadata["lexical_profile_id"]),
            lexical_stats=None
            if stats is None
            else LexicalStats(int(stats["chunks"]), int(stats["terms"]), float(stats["avgdl"])),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ContractMismatch(
            "metadata", "a ragwright collection contract", dict(metadata)
        ) from error


def reconcile_contract(
    expected: CollectionContract,
    stored: CollectionContract,
    *,
    add_chunking_version: bool,
    empty: bool = False,
) -> CollectionContract:
    """Check ``stored`` against ``expected``; return the contract to keep.

    Every field but ``lexical_stats`` must match (the stored statistics are kept), except
    that a chunking version missing from the stored list is appended when
    ``add_chunking_version`` is true (an explicit decision, so a typo in a budget never
    silently starts a second index inside the collection). A collection that holds no
    point (``empty``: a first run that failed before writing) is bound to no chunking
    version yet: it takes the expected ones. An expected contract with no chunking
    versions (read-only inspection) accepts the stored ones.

    Raises:
        ContractMismatch: naming the first field that differs.
    """
    for field, want, have in (
        ("vector_name", expected.vector_name, stored.vector_name),
        ("dimensions", expected.dimensions, stored.dimensions),
        ("distance", expected.distance, stored.distance),
        ("embedding_profile_id", expected.profile_id, stored.profile_id),
        ("embedding_profile_digest", expected.profile_digest, stored.profile_digest),
        ("sparse_vector_name", expected.sparse_vector_name, stored.sparse_vector_name),
        ("lexical_profile_id", expected.lexical_profile_id, stored.lexical_profile_id),
    ):
        if want != have:
            raise ContractMismatch(field, want, have)
    missing = [v for v in expected.chunking_versions if v not in stored.chunking_versions]
    if not missing:
        return stored
    if empty:
        return dataclasses.replace(stored, chunking_versions=expected.chunking_versions)
    if not add_chunking_version:
        raise ContractMismatch("chunking_versions", missing[0], list(stored.chunking_versions))
    return dataclasses.replace(stored, chunking_versions=(*stored.chunking_versions, *missing))


def require_compatible(
    contract: CollectionContract,
    profile: EmbeddingProfile,
    lexical_profile_id: str,
    *,
    chunking_version: str | None = None,
) -> None:
    """Raise :class:`ContractMismatch` unless the embedder's profile, the BM25 profile and
    (when given) the chunking version are the ones the collection was built with."""
    for field, expected, actual in (
        ("embedding_profile_id", profile.profile_id, contract.profile_id),
        ("embedding_profile_digest", profile.artifact_digest, contract.profile_digest),
        ("dimensions", profile.dimensions, contract.dimensions),
        ("lexical_profile_id", lexical_profile_id, contract.lexical_profile_id),
    ):
        if expected != actual:
            raise ContractMismatch(field, expected, actual)
    if chunking_version is not None and chunking_version not in contract.chunking_versions:
        raise ContractMismatch(
            "chunking_versions", chunking_version, list(contract.chunking_versions)
        )

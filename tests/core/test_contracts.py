from __future__ import annotations

import dataclasses

import pytest

from ragwright.core.contracts import (
    contract_for,
    contract_from_metadata,
    contract_to_metadata,
    reconcile_contract,
)
from ragwright.errors import ContractMismatch
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import LexicalStats

V1 = "section-paragraphs-80w-overlap1-v1"


def test_metadata_round_trip() -> None:
    contract = contract_for(HASHING_PROFILE, V1)
    assert contract_from_metadata(contract_to_metadata(contract)) == contract


@pytest.mark.parametrize(
    ("field", "value", "name"),
    [
        ("dimensions", 65, "dimensions"),
        ("distance", "dot", "distance"),
        ("profile_id", "other", "embedding_profile_id"),
        ("profile_digest", "sha256:other", "embedding_profile_digest"),
    ],
)
def test_any_difference_is_a_mismatch_naming_the_field(
    field: str, value: object, name: str
) -> None:
    stored = contract_for(HASHING_PROFILE, V1)
    expected = dataclasses.replace(stored, **{field: value})
    with pytest.raises(ContractMismatch) as caught:
        reconcile_contract(expected, stored, add_chunking_version=True)
    assert (caught.value.field, caught.value.expected, caught.value.actual) == (
        name,
        value,
        getattr(stored, field),
    )


def test_malformed_metadata_is_a_mismatch() -> None:
    with pytest.raises(ContractMismatch):
        contract_from_metadata({"dimensions": 3})


def test_lexical_stats_round_trip_and_are_kept_without_being_compared() -> None:
    stored = dataclasses.replace(
        contract_for(HASHING_PROFILE, V1), lexical_stats=LexicalStats(12, 300, 25.0)
    )
    assert contract_from_metadata(contract_to_metadata(stored)) == stored
    expected = contract_for(HASHING_PROFILE, V1)  # configuration knows no statistics
    kept = reconcile_contract(expected, stored, add_chunking_version=False)
    assert kept.lexical_stats == LexicalStats(12, 300, 25.0)


def test_a_profile_mismatch_names_both_profiles_and_how_to_move_in_one_line() -> None:
    stored = contract_for(HASHING_PROFILE, V1)
    expected = dataclasses.replace(stored, profile_id="other-profile-v1")
    with pytest.raises(ContractMismatch) as caught:
        reconcile_contract(expected, stored, add_chunking_version=False)
    message = str(caught.value)
    assert "\n" not in message
    assert f"built with embedding profile {stored.profile_id!r}" in message
    assert "the settings select 'other-profile-v1'" in message
    assert "RAGWRIGHT_EMBEDDING_PROVIDER" in message

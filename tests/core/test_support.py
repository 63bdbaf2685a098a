from __future__ import annotations

import pytest

from ragwright.core.support import check_support, content_words

DRAIN = "Drain the remaining jobs only while the shutdown deadline allows it. Then cancel I/O."
REFUND = "Refunds go back to the original payment method and take five to ten business days."


def test_content_words_drop_stop_words_short_words_and_plural_s() -> None:
    assert content_words("The jobs are draining in a queue") == {"job", "draining", "queue"}


def test_a_citation_containing_the_claim_is_supported() -> None:
    report = check_support(
        "Drain remaining jobs only while the shutdown deadline allows.", [("S1", DRAIN)]
    )
    assert not report.flagged and report.citations[0].supported
    assert report.citations[0].best_coverage >= 0.5


def test_a_citation_that_does_not_contain_the_claim_is_flagged() -> None:
    report = check_support(
        "Drain remaining jobs only while the shutdown deadline allows.", [("S1", REFUND)]
    )
    assert report.flagged and not report.citations[0].supported


def test_a_sentence_no_citation_supports_is_reported() -> None:
    claim = "Refunds are paid in cash at the branch office."
    answer = "Drain jobs only while the shutdown deadline allows. " + claim
    report = check_support(answer, [("S1", DRAIN)])
    assert report.flagged
    assert report.unsupported_sentences == (claim,)


def test_one_good_and_one_irrelevant_citation_flags_the_irrelevant_one() -> None:
    report = check_support(
        "Refunds take five to ten business days.", [("S1", REFUND), ("S2", DRAIN)]
    )
    assert [c.supported for c in report.citations] == [True, False] and report.flagged


# A ten-word claim, so a source sharing n of its words covers exactly n / 10 of it.
CLAIM = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet."
SOURCE_SHARING = {
    2: "alpha bravo kilo lima",
    3: "alpha bravo charlie kilo lima",
    5: "alpha bravo charlie delta echo kilo",
}


@pytest.mark.parametrize(
    ("shared", "min_coverage", "supported"),
    [
        (3, 0.29, True),  # coverage 0.3, just above the bound
        (3, 0.3, True),  # exactly at the bound: "at least" includes it
        (3, 0.31, False),  # just below the bound, though three words are shared
        (2, 0.2, True),
        (2, 0.3, False),  # the default bound: two shared words satisfy min_shared only
        (5, 0.5, True),
        (5, 0.51, False),
    ],
)
def test_min_coverage_decides_support_at_its_bound(
    shared: int, min_coverage: float, supported: bool
) -> None:
    report = check_support(CLAIM, [("S1", SOURCE_SHARING[shared])], min_coverage=min_coverage)
    citation = report.citations[0]
    assert citation.best_coverage == shared / 10 and citation.shared_words == shared
    assert citation.supported is supported
    assert report.unsupported_sentences == (() if supported else (CLAIM,))
    assert report.flagged is not supported


def test_the_default_min_coverage_is_three_tenths() -> None:
    assert check_support(CLAIM, [("S1", SOURCE_SHARING[3])]).citations[0].supported
    assert not check_support(CLAIM, [("S1", SOURCE_SHARING[2])]).citations[0].supported

from __future__ import annotations

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

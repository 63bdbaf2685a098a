"""Conditions and exceptions that follow a chosen sentence are carried with it."""

from __future__ import annotations

import pytest

from ragwright.core.conditions import conditions_for, qualifies
from ragwright.core.sentences import EvidenceSentence


def sentence(source: str, number: int, text: str, paragraph: int = 1) -> EvidenceSentence:
    return EvidenceSentence(f"{source}.{number}", source, text, paragraph)


RULE = sentence("S1", 1, "Drain the remaining jobs only while the shutdown deadline allows it.")
EXCEPTION = sentence("S1", 2, "If the deadline expires, cancel the in-flight work.")
OTHERWISE = sentence("S1", 3, "Otherwise, leave the jobs for the retry path.")
PLAIN = sentence("S1", 4, "Log how many jobs were left.")


@pytest.mark.parametrize(
    "text",
    [
        "If the deadline expires, cancel the in-flight work.",
        "Unless the queue is empty, keep the worker alive.",
        "Otherwise, page the on-call engineer.",
        "Only the owner may rotate the key.",
        "Except for refunds over 500 EUR, support approves alone.",
        "However, a replica must never be promoted by hand.",
        "When the certificate expires, clients refuse the connection.",
        "Once the disk is full, writes fail.",
        "Refunds are paid to the original card unless it was closed.",
        "Do not restart the primary during a failover.",
    ],
)
def test_conditional_and_contrasting_sentences_qualify(text: str) -> None:
    assert qualifies(text)


@pytest.mark.parametrize(
    "text",
    [
        "Readers then work through the jobs that were already queued.",
        "When the host signals shutdown, the worker stops taking new jobs.",
        "Rotate the certificate every 90 days.",
        "The ifconfig output lists every interface.",
    ],
)
def test_plain_statements_do_not_qualify(text: str) -> None:
    assert not qualifies(text)


def test_the_exception_after_a_chosen_rule_is_added() -> None:
    pool = [RULE, EXCEPTION, PLAIN]
    assert conditions_for([RULE], pool) == [EXCEPTION]


def test_a_chain_of_conditions_is_followed_and_stops_at_a_plain_sentence() -> None:
    pool = [RULE, EXCEPTION, OTHERWISE, PLAIN]
    assert conditions_for([RULE], pool) == [EXCEPTION, OTHERWISE]


def test_a_chain_is_bounded() -> None:
    more = sentence("S1", 4, "Unless the operator overrides it, stop.")
    pool = [RULE, EXCEPTION, OTHERWISE, more]
    assert conditions_for([RULE], pool) == [EXCEPTION, OTHERWISE]


def test_a_sentence_in_the_next_paragraph_is_not_added() -> None:
    next_paragraph = sentence("S1", 2, "If the deadline expires, cancel the work.", paragraph=2)
    assert conditions_for([RULE], [RULE, next_paragraph]) == []


def test_only_sentences_of_the_pool_are_added() -> None:
    """A sentence the model was not shown is never quoted."""
    assert conditions_for([RULE], [RULE]) == []


def test_already_chosen_sentences_are_not_added_twice_and_other_sources_are_apart() -> None:
    other = sentence("S2", 2, "If the deadline expires, do nothing.")
    pool = [RULE, EXCEPTION, other]
    assert conditions_for([RULE, EXCEPTION], pool) == []
    assert conditions_for([sentence("S2", 1, "Stop.")], pool) == [other]

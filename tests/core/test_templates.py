"""Approved templates: the file's rules, and which template a question selects."""

from __future__ import annotations

from typing import Any

import pytest

from ragwright.core.templates import ApprovedTemplate, parse_templates, select_template
from ragwright.errors import ConfigError

ENTRY = {"id": "refund-ack", "version": "3", "phrases": ["refund", "money back"], "text": "T"}


def test_the_first_matching_template_in_file_order_wins() -> None:
    templates = parse_templates(
        {"templates": [ENTRY, {**ENTRY, "id": "general", "phrases": ["money"]}]}, "f"
    )
    assert select_template(templates, "Can I get my MONEY BACK?") == templates[0]
    assert select_template(templates, "Where is my money?") == templates[1]
    assert select_template(templates, "How do I rotate certificates?") is None


@pytest.mark.parametrize(
    ("question", "matches"),
    [
        ("When is the refund paid?", True),
        ("Refund: how long?", True),
        ("Are refunds possible?", False),  # whole words only: no stemming, no guessing
        ("a prefund question", False),
    ],
)
def test_phrases_match_whole_words_case_insensitively(question: str, matches: bool) -> None:
    template = ApprovedTemplate("t", "1", ("refund",), "T")
    assert template.matches(question) is matches


def test_a_numeric_version_is_kept_as_text() -> None:
    (template,) = parse_templates({"templates": [{**ENTRY, "version": 3}]}, "f")
    assert template.version == "3"
    assert template.to_dict() == {"id": "refund-ack", "version": "3", "text": "T"}


@pytest.mark.parametrize(
    ("data", "setting"),
    [
        ([], "f"),
        ({"templates": {}}, "f"),
        ({"templates": ["x"]}, "f: templates[0]"),
        ({"templates": [{**ENTRY, "colour": "red"}]}, "f: templates[0].colour"),
        ({"templates": [{**ENTRY, "id": "has space"}]}, "f: templates[0].id"),
        ({"templates": [ENTRY, ENTRY]}, "f: templates[1].id"),
        ({"templates": [{**ENTRY, "phrases": []}]}, "f: templates[0].phrases"),
        ({"templates": [{**ENTRY, "phrases": "refund"}]}, "f: templates[0].phrases"),
        ({"templates": [{**ENTRY, "phrases": [" "]}]}, "f: templates[0].phrases"),
        ({"templates": [{k: v for k, v in ENTRY.items() if k != "text"}]}, "f: templates[0].text"),
        ({"templates": [{**ENTRY, "version": " "}]}, "f: templates[0].version"),
    ],
)
def test_a_malformed_file_names_the_entry_and_field(data: Any, setting: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_templates(data, "f")
    assert raised.value.setting == setting

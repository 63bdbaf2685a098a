"""What errors and logs say of a ``RAGWRIGHT_DATABASE_URL``: where it points, in one line,
whatever shape it came in, and never its password (issue 46, item 5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragwright.adapters.pg import probe, redacted
from ragwright.errors import ConfigError, StorageError
from tests.database_urls import DatabaseUrl, broken_urls, well_formed_urls
from tests.service.conftest import free_port

CLOSED_PORT = free_port()  # bound and released: nothing listens on it


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("postgresql://u:pw@127.0.0.1:5432/db", "postgresql://127.0.0.1:5432/db"),
        ("postgresql://u:pw@[::1]:5432/db", "postgresql://[::1]:5432/db"),
        ("postgresql://u@db.example/db?password=pw", "postgresql://db.example/db"),
        ("postgresql://u:pw@a:1,b:2/db", "postgresql://a:1,b:2/db"),
        ("postgresql:///db?host=/var/run/postgresql", "postgresql://%2Fvar%2Frun%2Fpostgresql/db"),
        ("postgresql://", "postgresql:///"),
        ("host=127.0.0.1 port=1 password=SeCrEtPw123 dbname=x", "postgresql://127.0.0.1:1/x"),
        ("host=a,b port=5432 password='a b'", "postgresql://a:5432,b:5432/"),
        ("hostaddr=::1 dbname='two\nlines'", "postgresql://[::1]/two%0Alines"),
        ("", "postgresql:///"),
    ],
)
def test_a_url_is_reduced_to_its_servers_and_database(url: str, where: str) -> None:
    assert redacted(url) == where


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:SeCrEtPw123@[::1/db",
        "postgresql://u:SeCrEtPw123%zz@127.0.0.1/db",
        "host=127.0.0.1 password='SeCrEtPw123",
        "host=127.0.0.1 password=SeCrEtPw123 nonsense",
    ],
)
def test_a_url_libpq_cannot_parse_is_not_shown_at_all(url: str) -> None:
    assert redacted(url) == "unparsable URL, not shown"


@given(well_formed_urls(port=5432))
def test_the_redaction_of_any_well_formed_url_is_its_server_alone(case: DatabaseUrl) -> None:
    assert redacted(case.url) == case.where


@given(broken_urls(port=5432))
def test_the_redaction_of_a_broken_url_never_holds_its_password(case: DatabaseUrl) -> None:
    shown = redacted(case.url)
    assert case.password not in shown
    assert len(shown.splitlines()) == 1


@settings(max_examples=150, deadline=None)  # each example tries a real (refused) connection
@given(st.one_of(well_formed_urls(port=CLOSED_PORT), broken_urls(port=CLOSED_PORT)))
def test_a_refused_or_unparsable_url_is_one_line_without_its_password(case: DatabaseUrl) -> None:
    expected = StorageError if case.where else ConfigError
    with pytest.raises(expected) as raised:
        probe(case.url, what="API key")
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert "RAGWRIGHT_DATABASE_URL" in message
    assert case.password not in message
    if case.where:
        assert f"({case.where})" in message

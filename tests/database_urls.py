"""Hypothesis strategies for ``RAGWRIGHT_DATABASE_URL`` in every shape libpq accepts (a
``postgresql://`` URL with the password in the user part or the query, or libpq's
``key=value`` words in any order, quoted or bare) and in broken ones it refuses, each
with the password it holds: the redaction tests check it never comes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from hypothesis import strategies as st

# Any text an environment variable can hold: no NUL, no lone surrogates.
PASSWORDS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=6, max_size=24
)
HOSTS = ["127.0.0.1", "::1"]
DATABASE = "ragwright"


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """A URL, the password it holds and what ``redacted()`` must make of it (``None`` for
    a URL libpq cannot parse)."""

    url: str
    password: str
    where: str | None


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@st.composite
def _escaped(draw: st.DrawFn, text: str) -> str:
    """``text`` percent-escaped as a URL needs, or every byte escaped, in either case."""
    if not draw(st.booleans()):
        return quote(text, safe="")
    hex_format = draw(st.sampled_from(["%{:02X}", "%{:02x}"]))
    return "".join(hex_format.format(byte) for byte in text.encode())


@st.composite
def _word(draw: st.DrawFn, value: str) -> str:
    """``value`` as a libpq ``key=value`` value: bare when it can be, else quoted."""
    bare = value and not any(c.isspace() or c in "'\\" for c in value)
    if bare and draw(st.booleans()):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def _userinfo_url(draw: st.DrawFn, password: str, host: str, port: int) -> str:
    return f"postgresql://ragwright:{draw(_escaped(password))}@{_netloc(host, port)}/{DATABASE}"


@st.composite
def _query_url(draw: st.DrawFn, password: str, host: str, port: int) -> str:
    others = draw(
        st.lists(
            st.sampled_from(["sslmode=disable", "connect_timeout=5", "application_name=fuzz"]),
            unique=True,
        )
    )
    at = draw(st.integers(0, len(others)))
    others.insert(at, f"password={draw(_escaped(password))}")
    user = draw(st.sampled_from(["", "ragwright@"]))
    return f"postgresql://{user}{_netloc(host, port)}/{DATABASE}?{'&'.join(others)}"


@st.composite
def _words(draw: st.DrawFn, password: str, host: str, port: int) -> str:
    pairs = [("host", host), ("port", str(port)), ("dbname", DATABASE), ("password", password)]
    if draw(st.booleans()):
        pairs.append(("user", "ragwright"))
    ordered = draw(st.permutations(pairs))
    equals = st.sampled_from(["=", " = ", "= ", " ="])
    spaces = st.sampled_from([" ", "  ", "\t", "\n"])
    words = [f"{key}{draw(equals)}{draw(_word(value))}" for key, value in ordered]
    return draw(spaces).join(words)


@st.composite
def well_formed_urls(draw: st.DrawFn, port: int) -> DatabaseUrl:
    """A well-formed URL to ``port`` on loopback holding a generated password."""
    password = draw(PASSWORDS)
    host = draw(st.sampled_from(HOSTS))
    shape = draw(st.sampled_from([_userinfo_url, _query_url, _words]))
    url = draw(shape(password, host, port))
    return DatabaseUrl(url, password, f"postgresql://{_netloc(host, port)}/{DATABASE}")


@st.composite
def broken_urls(draw: st.DrawFn, port: int) -> DatabaseUrl:
    """A URL libpq refuses (an unclosed IPv6 bracket, a bad escape, an unclosed quote, an
    unknown parameter) holding a generated password."""
    password = draw(PASSWORDS)
    escaped = draw(_escaped(password))
    quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    url = draw(
        st.sampled_from(
            [
                f"postgresql://ragwright:{escaped}@[::1/{DATABASE}",
                f"postgresql://ragwright:{escaped}@[::1:{port}/{DATABASE}?sslmode=disable",
                f"postgresql://ragwright:{escaped}%zz@127.0.0.1:{port}/{DATABASE}",
                f"postgresql://127.0.0.1:{port}/{DATABASE}?password={escaped}&bogus=1",
                f"host=127.0.0.1 port={port} password='{quoted}",
                f"host=127.0.0.1 password='{quoted}' bogus=1 dbname={DATABASE}",
            ]
        )
    )
    return DatabaseUrl(url, password, None)

"""How the page is sent: its Jinja2 templates rendered with the headers every page
carries (every asset from this process, nothing cached), the sign-in form with its
one-time token cookie, and the page's own script and stylesheet."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from ragwright.web.sessions import SIGN_IN_COOKIE, Session
from ragwright.web.words import MODE_WORDS, REASON_WORDS, reason_words

STATIC = {"ragwright.js": "text/javascript", "ragwright.css": "text/css"}
# Every asset comes from this process: no inline script, no other origin.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def _templates() -> Environment:
    templates = Environment(
        loader=PackageLoader("ragwright.web", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["reason_words"] = reason_words
    return templates


@cache
def _words() -> str:
    """The words the page's script shows for modes and reasons, as JSON."""
    return json.dumps({"modes": MODE_WORDS, "reasons": REASON_WORDS}, ensure_ascii=False)


@cache
def assets() -> dict[str, bytes]:
    """The page's script and stylesheet by name (:data:`STATIC`), read once."""
    return {
        name: (resources.files("ragwright.web") / "static" / name).read_bytes() for name in STATIC
    }


def page(template: str, code: int = 200, **context: Any) -> HTMLResponse:
    html = _templates().get_template(template).render(words=_words(), **context)
    return HTMLResponse(html, status_code=code, headers=PAGE_HEADERS)


def sign_in_page(request: Request, status: int = 200, error: str = "") -> HTMLResponse:
    """The sign-in form, with a new token in its form and in a cookie (checked against
    each other when the form comes back)."""
    token = Session.new_token()
    response = page("sign_in.html", status, csrf_token=token, error=error)
    response.set_cookie(
        SIGN_IN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=over_tls(request),
        path="/",
    )
    return response


def over_tls(request: Request) -> bool:
    """Whether the browser reached us over TLS (uvicorn sets the scheme from a trusted
    proxy's ``X-Forwarded-Proto``), so the cookie is sent over TLS only."""
    return request.url.scheme == "https"


def as_text(value: object) -> str | None:
    return value if isinstance(value, str) else None

"""The page's router mounted alone on a bare ``FastAPI()``: its routes are module-level
and take the session store and the application as dependencies, so a test hands them
in through ``dependency_overrides`` (no ``create_app``, no browser)."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragwright.application.keys import ApiKey
from ragwright.service.dependencies import application_of
from ragwright.service.problems import install_problem_handlers
from ragwright.web import routes
from ragwright.web.access import session_store
from ragwright.web.sessions import SESSION_COOKIE, SessionStore

KEY = ApiKey(
    id="k1",
    tenant="acme",
    scopes=("answer", "search"),
    documents=(),
    types=(),
    states=(),
    name="on call",
    created_at="2026-01-01T00:00:00Z",
    revoked_at=None,
)


def bare(store: SessionStore) -> TestClient:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(routes.router)
    application = SimpleNamespace(key=lambda key_id: KEY if key_id == KEY.id else None)
    app.dependency_overrides[application_of] = lambda: application
    app.dependency_overrides[session_store] = lambda: store
    return TestClient(app)


def test_the_page_router_alone_signs_in_and_out_through_the_store_it_is_given() -> None:
    store = SessionStore(max_per_key=10)
    session = store.create(KEY.id)
    client = bare(store)
    client.cookies.set(SESSION_COOKIE, session.session_id)

    page = client.get("/")
    assert page.status_code == 200
    assert session.csrf_token in page.text  # the ask page, not the sign-in form
    assert 'name="key"' not in page.text

    left = client.post("/ui/sign-out", data={"csrf": session.csrf_token}, follow_redirects=False)
    assert left.status_code == 303
    assert store.get(session.session_id) is None  # ended in the store handed in


def test_a_session_of_another_store_is_signed_out() -> None:
    other = SessionStore(max_per_key=10).create(KEY.id)
    client = bare(SessionStore(max_per_key=10))
    client.cookies.set(SESSION_COOKIE, other.session_id)

    page = client.get("/")
    assert page.status_code == 200
    assert other.csrf_token not in page.text
    assert 'name="key"' in page.text  # the sign-in form
    passage = client.get("/ui/passages", params={"document_id": "d", "chunk_id": "c"})
    assert passage.status_code == 401
    assert passage.json()["type"].endswith("signed-out")

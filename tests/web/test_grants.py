"""Who sees what through the page: tenants in every view, signing out, a revoked key,
a key without the scope, CSRF refusals and the session cookie's flags."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import httpx
from playwright.sync_api import Browser, BrowserContext, Page, expect

from ragwright.application import AddKeyRequest, RevokeKeyRequest
from tests.web.conftest import DRAIN, GLOBEX_PHRASE, WAIT_MS, Site, ask, sign_in

GLOBEX_PASSAGE = urlencode({"document_id": "globex-drain-policy", "chunk_id": "shutdown/p0"})


def test_a_key_of_one_tenant_never_sees_another_tenants_documents_in_any_view(
    page: Page, site: Site
) -> None:
    sign_in(page, site, "acme")
    turn = ask(page, DRAIN + " Globex drains every queued job?")
    expect(turn.locator(".evidence")).not_to_contain_text("globex")
    passage = page.request.get(f"{site.url}/ui/passages?{GLOBEX_PASSAGE}")
    assert passage.status == 404
    assert GLOBEX_PHRASE not in passage.text()
    page.goto(site.url + "/ui/status")
    expect(page.locator("#documents")).to_contain_text("worker-shutdown")
    expect(page.locator("main")).not_to_contain_text("globex")


def test_the_other_tenant_sees_its_own_document_where_the_first_sees_nothing(
    page: Page, site: Site
) -> None:
    # The same views for globex's key: the document is there, so the test above can fail.
    sign_in(page, site, "globex")
    turn = ask(page, DRAIN + " Globex drains every queued job?")
    expect(turn.locator(".evidence")).to_contain_text("globex-drain-policy")
    passage = page.request.get(f"{site.url}/ui/passages?{GLOBEX_PASSAGE}")
    assert passage.status == 200
    assert GLOBEX_PHRASE in passage.json()["text"]
    page.goto(site.url + "/ui/status")
    expect(page.locator("#documents")).to_contain_text("globex-drain-policy")
    expect(page.locator("#documents")).not_to_contain_text("worker-shutdown")


def test_the_session_cookie_is_httponly_samesite_strict_and_holds_no_key(
    page: Page, context: BrowserContext, site: Site
) -> None:
    sign_in(page, site)
    cookies = {c["name"]: c for c in context.cookies()}
    session = cookies["ragwright_session"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert session["path"] == "/"
    assert session["secure"] is False  # plain HTTP on loopback; over TLS it is Secure
    assert site.secrets["acme"] not in session["value"]
    assert page.evaluate("document.cookie") == ""  # invisible to the page's script


def test_the_cookie_is_secure_when_the_request_came_over_tls(site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=20) as client:
        token = sign_in_token(client)
        response = client.post(
            "/ui/sign-in",
            data={"key": site.secrets["acme"], "csrf": token},
            headers={"X-Forwarded-Proto": "https"},
        )
    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    assert "ragwright_session=" in cookie
    assert re.search(r";\s*secure", cookie, re.IGNORECASE), cookie
    assert re.search(r"samesite=strict", cookie, re.IGNORECASE), cookie


def test_signing_out_forgets_the_session_and_shows_the_sign_in_form(
    page: Page, context: BrowserContext, site: Site
) -> None:
    sign_in(page, site)
    old = {c["name"]: c["value"] for c in context.cookies()}["ragwright_session"]
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert "ragwright_session" not in {c["name"] for c in context.cookies()}
    # The old session id is dead on the server too, not only forgotten by the browser.
    with httpx.Client(base_url=site.url, timeout=20, cookies={"ragwright_session": old}) as client:
        assert "API key" in client.get("/").text
        assert client.get(f"/ui/passages?{GLOBEX_PASSAGE}").status_code == 401


def test_a_revoked_key_is_signed_out_at_its_next_request(page: Page, site: Site) -> None:
    added = site.application.add_key(AddKeyRequest(tenant="acme", scopes=("answer",), name="r"))
    site.secrets["revoked"] = added.secret
    sign_in(page, site, "revoked")
    expect(page.get_by_label("Your question")).to_be_visible()
    site.application.revoke_key(RevokeKeyRequest(added.key.id))
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("You are signed out")
    page.reload()
    expect(page.get_by_label("API key")).to_be_visible()


def test_a_wrong_key_is_refused_with_a_reason_and_no_session(
    page: Page, context: BrowserContext, site: Site
) -> None:
    page.goto(site.url + "/")
    page.get_by_label("API key").fill(site.secrets["acme"][:-3] + "xyz")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("That API key is unknown or revoked.")
    assert "ragwright_session" not in {c["name"] for c in context.cookies()}


def test_a_key_without_the_answer_scope_is_told_why_it_cannot_ask(page: Page, site: Site) -> None:
    sign_in(page, site, "acme-status")
    expect(page.locator("#no-answer-scope")).to_contain_text("lacks the answer scope")
    expect(page.get_by_label("Your question")).to_have_count(0)
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    refused = page.request.post(
        f"{site.url}/ui/ask",
        data={"question": DRAIN},
        headers={"X-CSRF-Token": csrf or ""},
    )
    assert refused.status == 403
    assert refused.json()["required_scope"] == "answer"


def test_state_changing_requests_without_the_csrf_token_are_refused(
    page: Page, context: BrowserContext, site: Site
) -> None:
    sign_in(page, site)
    calls = len(site.model.calls)
    for headers in ({}, {"X-CSRF-Token": "not-the-token"}):
        refused = page.request.post(
            f"{site.url}/ui/ask", data={"question": "a new question"}, headers=headers
        )
        assert refused.status == 403, refused.text()
        assert refused.json()["type"].endswith("/csrf")
    assert len(site.model.calls) == calls  # nothing reached the model
    refused = page.request.post(
        f"{site.url}/ui/ingest",
        multipart={"file": {"name": "x.md", "mimeType": "text/markdown", "buffer": b"# x"}},
    )
    assert refused.status == 403
    refused = page.request.post(f"{site.url}/ui/sign-out", form={"csrf": "wrong"})
    assert refused.status == 403
    page.reload()
    expect(page.get_by_label("Your question")).to_be_visible()  # still signed in


def test_signing_in_needs_the_forms_own_token(site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=20) as client:
        response = client.post("/ui/sign-in", data={"key": site.secrets["acme"], "csrf": "x"})
    assert response.status_code == 403
    assert "ragwright_session" not in response.headers.get("set-cookie", "")


def sign_in_token(client: httpx.Client) -> str:
    page = client.get("/")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None
    return match.group(1)


def test_the_status_pages_recent_refusals_are_the_keys_tenants_only(
    browser: Browser, site: Site
) -> None:
    acme = browser.new_context()
    acme.set_default_timeout(WAIT_MS)
    globex = browser.new_context()
    globex.set_default_timeout(WAIT_MS)
    try:
        acme_page, globex_page = acme.new_page(), globex.new_page()
        sign_in(acme_page, site, "acme")
        sign_in(globex_page, site, "globex")
        acme_page.goto(site.url + "/ui/status")
        before = acme_page.locator("#refusals tbody tr").count()
        site.model.behaviour = "insufficient"
        ask(globex_page, "Which globex team owns the drain policy?")
        globex_page.goto(site.url + "/ui/status")
        expect(globex_page.locator("#refusals")).to_contain_text("insufficient")
        acme_page.reload()
        assert acme_page.locator("#refusals tbody tr").count() == before
    finally:
        acme.close()
        globex.close()

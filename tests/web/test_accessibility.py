"""The page for everyone: axe-core finds nothing serious or critical in any main state
at 400 px and 1280 px, the keyboard alone goes from signing in to reading a cited
passage, and nothing moves while an answer streams in."""

from __future__ import annotations

import re
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.web.conftest import DRAIN, WAIT_MS, Site, ask, sign_in

BLOCKING = ("serious", "critical")


def blocking_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings (the script ships in the Python package:
    nothing is fetched)."""
    results = Axe().run(page)
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in results.response["violations"]
        if v["impact"] in BLOCKING
    ]


@pytest.mark.parametrize("width", [400, 1280])
def test_axe_finds_nothing_serious_in_the_main_states(
    browser: Browser, site: Site, width: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        page.goto(site.url + "/")
        found = {"sign in": blocking_violations(page)}
        sign_in(page, site)
        ask(page, DRAIN)
        page.locator(".citations a").first.click()
        expect(page.locator("#passage")).to_be_visible()
        found["answer and passage"] = blocking_violations(page)
        site.model.behaviour = "down"
        ask(page, f"What must a handler do with the cancellation token? ({width})")
        found["not an answer"] = blocking_violations(page)
        page.goto(site.url + "/ui/status")
        found["status"] = blocking_violations(page)
        assert not any(found.values()), found
        # Readable at this width: nothing wider than the viewport.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        context.close()


def test_the_keyboard_alone_signs_in_asks_and_opens_a_citation(page: Page, site: Site) -> None:
    page.goto(site.url + "/")

    def tab_to(selector: str, limit: int = 25) -> None:
        for _ in range(limit):
            page.keyboard.press("Tab")
            if page.evaluate(f"document.activeElement.matches({selector!r})"):
                return
        raise AssertionError(f"Tab never reached {selector}")

    tab_to("#key")
    page.keyboard.type(site.secrets["acme"])
    page.keyboard.press("Enter")
    page.locator("#sign-out").wait_for()
    tab_to("#question")
    page.keyboard.type(DRAIN)
    page.keyboard.press("Enter")
    page.locator("article.turn[data-mode]").wait_for()
    tab_to(".citations a")
    page.keyboard.press("Enter")
    expect(page.locator("#passage")).to_be_focused()
    expect(page.locator("#passage-text")).to_contain_text("completes the channel writer")
    page.keyboard.press("Escape")
    expect(page.locator("#passage")).to_be_hidden()
    expect(page.locator(".citations a").first).to_be_focused()
    tab_to("#new-conversation", limit=60)
    page.keyboard.press("Enter")
    expect(page.locator("article.turn")).to_have_count(0)
    expect(page.locator("#question")).to_be_focused()


def test_nothing_moves_while_an_answer_streams_in(page: Page, site: Site) -> None:
    sign_in(page, site)
    page.evaluate(
        """() => {
          window.__shifts = [];
          new PerformanceObserver((list) => {
            for (const entry of list.getEntries()) window.__shifts.push(entry.value);
          }).observe({type: "layout-shift", buffered: false});
        }"""
    )
    ask(page, DRAIN)  # one turn above, so the next one is not the first on the page
    site.model.behaviour = "hold"
    page.get_by_label("Your question").fill("What does the worker do when the host signals?")
    page.get_by_label("Your question").press("Enter")
    turn = page.locator("article.turn").nth(1)
    # The evidence is on the page; the answer has not come yet.
    expect(turn.locator("summary")).to_have_text(re.compile(r"Evidence: \d+ passages?"))
    before = page.evaluate("window.__shifts.length")
    site.model.release.set()
    turn.and_(page.locator("[data-mode]")).wait_for()
    expect(turn.locator(".mode")).to_have_text("Answered")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")
    shifts = page.evaluate("window.__shifts").copy()
    # Not a small score: none at all (a one-line shift of a few lines scores ~0.001).
    assert shifts[before:] == [], shifts

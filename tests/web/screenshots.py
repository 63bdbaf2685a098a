"""Screenshots of the page's main states at 400 px and 1280 px into docs/screenshots/.

Run: ``PYTHONPATH=src python -m tests.web.screenshots`` (the same app, fake model and
Chromium as tests/web). Not a test: it only draws what a person sees, for the docs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from tests.web.conftest import DRAIN, WAIT_MS, Site, ask, launch, serving, sign_in

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WIDTHS = (400, 1280)


def shoot(page: Page, name: str, width: int) -> None:
    page.screenshot(path=str(OUT / f"{name}-{width}.png"), full_page=True)


def states(page: Page, site: Site, width: int) -> None:
    page.goto(site.url + "/")
    shoot(page, "sign-in", width)
    sign_in(page, site)
    site.model.behaviour = "answer"
    ask(page, DRAIN)
    page.locator(".citations a").first.click()
    page.locator("#passage").wait_for()
    shoot(page, "answer", width)
    page.get_by_role("button", name="New conversation").click()
    site.model.behaviour = "down"
    ask(page, f"What happens to unfinished jobs when the deadline expires? ({width} px)")
    site.model.behaviour = "insufficient"
    ask(page, f"How do I rotate the database password? ({width} px)")
    shoot(page, "not-an-answer", width)
    site.model.behaviour = "answer"
    page.goto(site.url + "/ui/status")
    shoot(page, "status", width)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as home,
        serving(Path(home)) as site,
        sync_playwright() as playwright,
    ):
        browser = launch(playwright)
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 800})
            context.set_default_timeout(WAIT_MS)
            states(context.new_page(), site, width)
            context.close()
        browser.close()
    for path in sorted(OUT.glob("*.png")):
        print(path.relative_to(OUT.parents[1]), path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()

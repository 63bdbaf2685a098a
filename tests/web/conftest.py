"""The page in a real browser: Debian's Chromium driven by Playwright for Python, against
the real app (the service's composition with a hashing embedder and a switchable model
fake) served by uvicorn on a loopback port in this process.

One server and one browser per module; each test opens its own browser context (its
own cookies). Every wait has a timeout (Playwright's default is set below).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from ragwright.application import AddKeyRequest, Application, IngestRequest
from ragwright.chat.contract import ChatRequest, ChatResponse, Deadline
from ragwright.core.documents import validate_document
from ragwright.errors import ChatError, FailureCategory
from ragwright.service import create_app
from ragwright.types import SourceSection
from tests.application.components import fake_application
from tests.service.conftest import CORPUS, LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The longest any wait in these tests may take (a bound on a busy machine, not a speed
# requirement): Playwright's actions and waits, and its expect() assertions.
WAIT_MS = 60_000
expect.set_options(timeout=WAIT_MS)
DRAIN = "Should I drain all queued work during shutdown?"
DRAIN_ANSWER = "Drain the remaining jobs only while the shutdown deadline allows it."
GLOBEX_PHRASE = "Globex drains every queued job at shutdown"


class SwitchableModel:
    """A provider fake whose behaviour the test sets: ``answer`` (cites S1), ``hold`` (the
    same answer once ``release`` is set), ``insufficient``, ``down`` (a transient
    failure) or ``crash`` (an unexpected error after the evidence was sent). Records each
    call's behaviour in ``calls``."""

    name = "switchable"

    def __init__(self) -> None:
        self.behaviour = "answer"
        self.calls: list[str] = []
        self._lock = threading.Lock()
        # With behaviour "hold" a call answers only once the test sets this.
        self.release = threading.Event()

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        with self._lock:
            behaviour = self.behaviour
            self.calls.append(behaviour)
        if behaviour == "hold":
            for _ in range(WAIT_MS // 10):
                if self.release.is_set():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the test never released the held call")
        if behaviour == "down":
            raise ChatError(self.name, FailureCategory.TRANSIENT, "switched off")
        if behaviour == "crash":
            raise RuntimeError("the fake model crashed")
        if behaviour == "insufficient":
            body: dict[str, Any] = {"status": "insufficient", "answer": "", "sourceIds": []}
        else:
            body = {"status": "answered", "answer": DRAIN_ANSWER, "sourceIds": ["S1"]}
        return ChatResponse(json.dumps(body), "stop", "switchable-model", provider=self.name)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> Any:
        raise AssertionError("the answer path does not stream from the provider")
        yield  # pragma: no cover


@dataclass
class Site:
    url: str
    application: Application
    model: SwitchableModel
    secrets: dict[str, str] = field(default_factory=dict)


def globex_document() -> Any:
    return validate_document(
        document_id="globex-drain-policy",
        title="Globex drain policy",
        document_type="runbook",
        publication_state="published",
        sections=[
            SourceSection(
                "shutdown",
                "Shutdown",
                (
                    f"{GLOBEX_PHRASE} and drains all queued work during shutdown without "
                    "any deadline.",
                ),
            )
        ],
        tenant="globex",
    )


@contextmanager
def serving(home: Path) -> Iterator[Site]:
    """The app over the sample corpus (tenant ``acme``) and one document of tenant
    ``globex``, with keys ``acme`` (answer, search, ingest), ``acme-status`` (search)
    and ``globex`` (answer, search), served on a loopback port."""
    model = SwitchableModel()
    # Every ask reaches the model (no cached reply), so a test's behaviour applies.
    application, _ = fake_application(home, model, chat_cache_ttl=0.001)
    application.ingest(IngestRequest((CORPUS,), tenant="acme"))
    application.ingest(IngestRequest((), documents=(globex_document(),), tenant="globex"))
    secrets = {}
    for name, tenant, scopes in (
        ("acme", "acme", ("answer", "search", "ingest")),
        ("acme-status", "acme", ("search",)),
        ("globex", "globex", ("answer", "search")),
    ):
        added = application.add_key(AddKeyRequest(tenant=tenant, scopes=scopes, name=name))
        secrets[name] = added.secret
    # No re-probe while a test has the model "down": each test sets the behaviour it needs.
    with LiveServer(create_app(application, probe_model=False, model_recheck=3600)) as url:
        yield Site(url, application, model, secrets)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with serving(tmp_path_factory.mktemp("web") / "home") as served:
        yield served


def launch(playwright: Playwright) -> Browser:
    """Debian's Chromium (never a downloaded browser)."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = launch(playwright)
        yield launched
        launched.close()


@pytest.fixture(autouse=True)
def model_answers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that uses the site starts (and leaves it) with the model answering."""
    if "site" not in request.fixturenames:
        yield
        return
    site: Site = request.getfixturevalue("site")
    site.model.behaviour = "answer"
    site.model.release.clear()
    yield
    site.model.behaviour = "answer"
    site.model.release.set()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    opened = browser.new_context(viewport={"width": 1280, "height": 900})
    opened.set_default_timeout(WAIT_MS)
    yield opened
    opened.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def sign_in(page: Page, site: Site, name: str = "acme") -> None:
    """Sign in through the form, as a person would: type the key, press Enter."""
    page.goto(site.url + "/")
    page.get_by_label("API key").fill(site.secrets[name])
    page.get_by_label("API key").press("Enter")
    # The sign-in form is at / too: wait for the signed-in page, not for the URL.
    page.locator("#sign-out").wait_for()


def ask(page: Page, question: str) -> Any:
    """Type the question, press Enter, and wait for that turn to end (its ``data-mode``)."""
    turns = page.locator("article.turn")
    before = turns.count()
    page.get_by_label("Your question").fill(question)
    page.get_by_label("Your question").press("Enter")
    turn = turns.nth(before)
    turn.and_(page.locator("[data-mode]")).wait_for()
    return turn

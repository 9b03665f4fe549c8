"""Headless Debian Chromium driven by Playwright against Django's live server.

Playwright's sync API runs an event loop in the test thread, and Django
refuses ORM calls from a thread with a running loop unless told otherwise;
the tests only touch the database between browser steps.
"""

import os
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-quic", "--no-first-run", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "browser"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    """Every test in this folder is a browser test, marked so whether its module says so or not."""
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/browser.sh` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watch:
    """What a page did that it should not: dialogs, console errors, CSP violations, requests."""

    def __init__(self, page, origin):
        self.origin = origin
        self.dialogs, self.console_errors, self.requests = [], [], []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => console.error("
            "'CSP violation', e.violatedDirective, e.sourceFile, e.lineNumber, e.sample, e.blockedURI))"
        )

    @property
    def errors(self):
        """Console errors, less htmx's log of a request the test's own navigation aborted.

        htmx logs an aborted request as two errors, `htmx:afterRequest` then `htmx:sendAbort`;
        a poll in flight when the test leaves the page is aborted by the browser, not failed.
        A failed request (`htmx:sendError`, `htmx:timeout`) still counts, with its afterRequest.
        """
        errors = []
        for message in self.console_errors:
            if "htmx:sendAbort" in message:
                if errors and "htmx:afterRequest" in errors[-1]:
                    errors.pop()
                continue
            errors.append(message)
        return errors

    def foreign_requests(self):
        return [u for u in self.requests if not u.startswith(self.origin) and not u.startswith("data:")]


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.watch = Watch(page, live_server.url)
    yield page
    context.close()


def login(page, live_server, username, password):
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def screenshot(page, name, full_page=False):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def ready(page):
    """Wait until review.js runs on the current page (scripts are deferred)."""
    page.wait_for_function("document.documentElement.classList.contains('js') && window.htmx !== undefined")


def settled(page):
    """Wait until no htmx request is in flight: leaving a page aborts one, which htmx logs as an
    error (on a loaded machine a preview can still be on its way)."""
    page.wait_for_function("!document.querySelector('.htmx-request')")

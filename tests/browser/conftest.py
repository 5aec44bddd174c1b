"""Headless Debian Chromium driven by Playwright against pytest-django's live server."""

from __future__ import annotations

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; Django refuses ORM calls there unless
# told that the test knows what it is doing (the live server answers from its own thread).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Chromium is not installed: run `make services` (Debian package chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def settled(page) -> None:
    """htmx wires up swapped-in inputs only once the swap has settled: type after that."""
    from playwright.sync_api import expect

    expect(page.locator(".htmx-added, .htmx-settling, .htmx-swapping")).to_have_count(0)

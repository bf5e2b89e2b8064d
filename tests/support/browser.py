"""Real-browser fixtures (Playwright driving Debian's Chromium), shared by every page's
tests: one Chromium per test module (one definition, so two apps' tests never start a second
sync Playwright in the same thread), a fresh context per test, console errors and dialogs
collected, a screenshot on failure."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so a fixture can see that its test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module: the sync API runs an event loop in this
    thread while it is open, which asyncio code in later modules (MCP clients, async
    generators) must not find running. Missing Chromium skips locally and
    fails in CI (CI installs it with apt)."""
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # between browser steps are still plain synchronous code.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                ],
            )
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, request, live_server):
    """A fresh browser context per test; a screenshot lands in test-artifacts/ on failure.
    Console errors (including Content-Security-Policy violations) are collected on
    `page.console_errors`, and any alert() the page opens on `page.dialogs`."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.console_errors = []
    page.dialogs = []
    page.on(
        "console",
        lambda message: (
            page.console_errors.append(message.text) if message.type == "error" else None
        ),
    )
    page.on("pageerror", lambda error: page.console_errors.append(str(error)))

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.nodeid)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()

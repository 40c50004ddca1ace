"""Debian's headless Chromium driven by Playwright, for every test that looks at a page.

``require_browser()`` skips the calling test module (with the reason) when ``/usr/bin/chromium`` or the
``playwright`` package is missing: ``scripts/install-browser.sh`` installs the browser, and Playwright never
downloads one here. ``open_page`` yields a fresh page that fails the test on page errors, console errors
or dialogs; ``screenshot`` saves a full-page PNG into ``$CONTEB_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def require_browser() -> ModuleType:
    """Playwright's sync API, or a module-level skip naming what is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (run scripts/install-browser.sh)", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="the playwright package is missing (the dev extra)")


@contextlib.contextmanager
def open_page(width: int = 1400, height: int = 1000, allow_errors: bool = False) -> Iterator[Any]:
    """A fresh page of ``width`` × ``height`` CSS pixels; on exit, asserts no page error, console error or dialog."""
    sync_api = require_browser()
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
        page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
        page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
        try:
            yield page
        finally:
            context.close()
            browser.close()
    if not allow_errors:
        assert not errors, errors


def screenshot(page: Any, name: str, full_page: bool = True) -> None:
    """Save ``page`` as ``$CONTEB_SCREENSHOTS/name`` when that variable is set; nothing otherwise."""
    folder = os.environ.get("CONTEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=full_page)

"""One headless Chromium for a stretch of browser tests (the system binary; never
`playwright install`).

Starting Playwright's driver and the browser costs seconds; a fresh browser context per test (its
own cookies, storage and pages) isolates tests as well as a fresh browser would. The browser is
started by the first browser test and stopped (tests/web/conftest.py) as soon as the next test is
not a browser test: while Playwright's sync API runs, this thread has a running event loop, which
the other tests (``asyncio.run``, Django's async-safety check) must not see.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]


class SharedChromium:
    def __init__(self) -> None:
        self.playwright: Any = None
        self.browser: Any = None
        self.environment: pytest.MonkeyPatch | None = None

    def start(self) -> Any:
        """The running browser, started on first use."""
        if self.browser is None:
            sync_api = pytest.importorskip("playwright.sync_api")
            # Playwright's sync API runs an event loop in this thread; Django's ORM would refuse
            # to run next to it without this (the ORM calls in the browser tests are plain
            # synchronous test setup).
            self.environment = pytest.MonkeyPatch()
            self.environment.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            try:
                self.playwright = sync_api.sync_playwright().start()
                self.browser = self.playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
            except BaseException:
                self.stop()
                raise
        return self.browser

    def stop(self) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
            if self.playwright is not None:
                self.playwright.stop()
        finally:
            self.browser = self.playwright = None
            if self.environment is not None:
                self.environment.undo()
                self.environment = None


SHARED_CHROMIUM = SharedChromium()

"""Importing HoloDeck history in a real browser: upload the seed file twice on /import/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import make_user
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot

__all__ = ["browser_page"]  # the fixture, imported for the tests below

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def upload(page: Any, path: Path) -> str:
    page.set_input_files("#import-files", str(path))
    page.click("form.import-form button[type=submit]")
    page.wait_for_selector("#import-results")
    text: str = page.locator("#import-results").inner_text()
    return text


def test_staff_import_the_seed_history_and_importing_it_again_adds_nothing(
    live_server: Any, browser_page: Any, transactional_db: None, shared_dir: Path
) -> None:
    page = browser_page
    seed = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    login(page, live_server, make_user("operator", staff=True))
    page.click("text=Import results")
    page.wait_for_url(f"{live_server.url}{reverse('import_results')}")

    first = upload(page, seed)
    screenshot(page, "import-seed")
    assert "Imported 24 runs" in first
    assert "24 runs:" in first and "seed_runs.json" in first
    assert Run.objects.filter(source=Run.Source.IMPORT).count() == 24

    again = upload(page, seed)
    screenshot(page, "import-seed-again")
    assert "Imported 0 runs · 24 already imported" in again
    assert "already imported as runs #" in again
    assert Run.objects.count() == 24

    # The links lead to the runs.
    page.locator("#import-results a").first.click()
    page.wait_for_selector("#case-list")
    assert "/runs/" in page.url


def test_an_oversized_upload_shows_the_limit_on_the_page(
    live_server: Any, browser_page: Any, transactional_db: None, shared_dir: Path, settings: Any
) -> None:
    settings.HOLODECK_IMPORT_MAX_BYTES = 100_000
    page = browser_page
    login(page, live_server, make_user("operator", staff=True))
    page.goto(f"{live_server.url}{reverse('import_results')}")
    page.set_input_files("#import-files", str(shared_dir / "fixtures/holodeck/seed_runs.json"))
    page.click("form.import-form button[type=submit]")
    problem = page.locator("#import-problem").inner_text()
    screenshot(page, "import-too-large")
    assert "The upload is too large" in problem and "at most 0.1 MB per upload" in problem
    assert page.locator("#import-files").is_visible()  # the form is there to try again
    assert Run.objects.count() == 0

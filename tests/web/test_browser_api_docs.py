"""The OpenAPI docs page (/api/v1/docs) in a real browser: Swagger UI comes from the package's
own static files and an init script of ours, under the page's CSP, asking no other host."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.web.factories import make_user
from tests.web.test_browser import CHROMIUM, browser_page, login
from tests.web.test_browser_confirm import watch_console

__all__ = ["browser_page"]  # the fixture, used by name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def test_the_api_docs_list_the_operations_with_no_console_error_and_no_other_host(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    problems = watch_console(page)
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    login(page, live_server, make_user("operator", staff=True))

    response = page.goto(f"{live_server.url}/api/v1/docs")
    assert response is not None and response.status == 200
    assert "script-src 'self'" in (response.headers.get("content-security-policy") or "")
    page.wait_for_selector(".opblock-summary-path", timeout=60_000)  # 1.4 MB of script

    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/v1/runs" in paths and "/api/v1/imports" in paths, paths
    assert page.locator(".opblock-post").count() >= 3
    assert problems == []
    assert hosts == {urlsplit(live_server.url).netloc}, hosts

"""Confirmations without inline handlers, in a real browser: a form with ``data-confirm`` asks
first (static/js/confirm.js) and submits only when accepted; the Tokens page creates a token,
shows it once in a copyable box and revokes it. No Content Security Policy error on the way."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from runs.models import ApiToken, Run
from tests.web.factories import RunSpec, build_run, make_project, make_user
from tests.web.test_browser import CHROMIUM, browser_page, login, open_run, screenshot

__all__ = ["browser_page"]  # the fixture, used by name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def watch_console(page: Any) -> list[str]:
    """Console errors and page errors (a CSP violation shows up here)."""
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: problems.append(str(err)))
    return problems


def test_cancelling_a_run_asks_first_and_dismissing_keeps_it_running(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    problems = watch_console(page)
    run = build_run(make_project(), RunSpec(status="running", done=2))
    login(page, live_server, make_user("operator", staff=True))
    open_run(page, live_server, run)
    form = page.locator(f'form[action="{reverse("run_cancel", args=[run.pk])}"]')
    assert form.get_attribute("onsubmit") is None
    assert form.get_attribute("data-confirm", timeout=1000) is not None

    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    form.locator("button[type=submit]").click()
    page.wait_for_timeout(300)  # a submit, had it happened, would have started by now
    assert asked == [f"Cancel run #{run.pk}? Cases not yet started will not run."]
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    page.once("dialog", lambda dialog: dialog.accept())
    form.locator("button[type=submit]").click()  # sent with htmx: the page is redrawn in place
    page.locator(".messages").wait_for()
    assert f"Run {run.pk} cancelled." in page.locator(".messages").inner_text()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    screenshot(page, "run-cancelled-after-confirm")
    assert problems == []


def test_a_token_is_created_shown_once_and_revoked_after_confirming(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    problems = watch_console(page)
    user = make_user("scripter")
    login(page, live_server, user)
    page.click("nav >> text=Tokens")
    page.wait_for_url(f"{live_server.url}{reverse('tokens')}")
    page.fill("input[name=name]", "CI nightly")
    page.click("button:has-text('Create token')")
    box = page.locator("#new-token-secret")
    box.wait_for()
    secret = box.input_value()
    assert secret.startswith("hdw_") and len(secret) == 47
    assert "copy it now" in page.locator("#new-token").inner_text().lower()
    assert page.locator("button[data-copy]").is_visible()  # the script unhid it
    screenshot(page, "tokens-created")

    page.goto(f"{live_server.url}{reverse('tokens')}")
    assert secret not in page.content()
    token = ApiToken.objects.get(user=user)
    row = page.locator(f"#token-{token.pk}")
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator("button:has-text('Revoke')").click()
    page.wait_for_timeout(300)
    token.refresh_from_db()
    assert token.is_active

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        row.locator("button:has-text('Revoke')").click()
    assert "revoked" in page.locator(f"#token-{token.pk}").inner_text()
    token.refresh_from_db()
    assert not token.is_active
    screenshot(page, "tokens-revoked")
    assert problems == []

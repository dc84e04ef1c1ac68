"""The no-worker banner's context processor on requests refused before anyone is logged in."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


@override_settings(CELERY_EAGER=False)
@pytest.mark.parametrize("path", ["/", "/runs/", "/healthz"])
def test_a_host_not_allowed_gets_the_400_page_not_a_500(path: str) -> None:
    # The host check fails in CommonMiddleware, before AuthenticationMiddleware sets
    # request.user; the 400 page extends base.html, whose banner asks about the user.
    client = Client(HTTP_HOST="not-allowed.example", raise_request_exception=False)
    response = client.get(path)
    assert response.status_code == 400
    assert "No worker is running" not in response.text

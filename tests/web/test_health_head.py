"""Probes that ask with HEAD (some load balancers do) get the same status as with GET."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def test_healthz_answers_head_with_200_and_no_body(client: Client) -> None:
    response = client.head("/healthz")
    assert response.status_code == 200
    assert response.content == b""


@override_settings(CELERY_EAGER=True)
def test_readyz_answers_head_with_its_get_status(client: Client) -> None:
    assert client.head("/readyz").status_code == client.get("/readyz").status_code == 200

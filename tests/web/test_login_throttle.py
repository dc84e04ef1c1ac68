"""Every login path is throttled by one client address, and a bad bearer token is a 401 on every
method (holodeck_web/login.py, runs/api/auth.py)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from runs.services.tokens import token_create, token_revoke
from tests.web.factories import PASSWORD, make_project, make_user

pytestmark = pytest.mark.django_db

ADMIN_LOGIN = "/admin/login/"


@pytest.fixture(autouse=True)
def fresh_counters() -> Generator[None]:
    cache.clear()
    yield
    cache.clear()


def attempt(client: Client, path: str, password: str, **headers: str) -> int:
    response = client.post(path, {"username": "operator", "password": password}, headers=headers)
    return response.status_code


# --- the admin's login ----------------------------------------------------------------------


def test_twenty_wrong_admin_passwords_are_throttled_and_then_even_the_right_one_is_refused(
    client: Client, staff: User
) -> None:
    codes = [attempt(client, ADMIN_LOGIN, "wrong") for _ in range(20)]
    assert codes.count(429) >= 15  # 5 allowed per address and user name (the default)
    assert set(codes[:5]) == {200}
    assert attempt(client, ADMIN_LOGIN, PASSWORD) == 429
    assert "_auth_user_id" not in client.session


def test_the_admin_login_still_logs_staff_in_and_refuses_a_viewer(client: Client) -> None:
    make_user("operator", staff=True)
    make_user("viewer")
    response = client.post(ADMIN_LOGIN, {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    response = client.post(
        ADMIN_LOGIN + "?next=/admin/", {"username": "operator", "password": PASSWORD}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_both_login_pages_share_one_bucket(client: Client, staff: User) -> None:
    for _ in range(5):
        attempt(client, "/login/", "wrong")
    assert attempt(client, ADMIN_LOGIN, "wrong") == 429


# --- the client's address -------------------------------------------------------------------


def test_a_forwarded_header_is_ignored_unless_configured(client: Client, staff: User) -> None:
    for n in range(5):
        attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For=f"10.0.0.{n}")
    # Every spoofed address landed in REMOTE_ADDR's bucket.
    assert attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For="10.9.9.9") == 429


def test_with_the_header_configured_two_clients_behind_one_proxy_get_separate_buckets(
    client: Client, staff: User, settings: Any
) -> None:
    settings.HOLODECK_CLIENT_IP_HEADER = "X-Forwarded-For"
    settings.HOLODECK_TRUSTED_PROXIES = 1
    for _ in range(5):
        attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For="203.0.113.1")
    assert attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For="203.0.113.1") == 429
    assert attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For="203.0.113.2") == 200
    # A client prepending its own guess does not escape: the proxy's entry is the one read.
    spoofed = "198.51.100.7, 203.0.113.1"
    assert attempt(client, ADMIN_LOGIN, "wrong", X_Forwarded_For=spoofed) == 429


def test_two_trusted_proxies_read_the_second_address_from_the_right(
    client: Client, staff: User, settings: Any
) -> None:
    settings.HOLODECK_CLIENT_IP_HEADER = "X-Forwarded-For"
    settings.HOLODECK_TRUSTED_PROXIES = 2
    for n in range(5):
        attempt(client, "/login/", "wrong", X_Forwarded_For=f"9.9.9.{n}, 203.0.113.1, 10.0.0.2")
    assert attempt(client, "/login/", "wrong", X_Forwarded_For="203.0.113.1, 10.0.0.2") == 429
    assert attempt(client, "/login/", "wrong", X_Forwarded_For="203.0.113.5, 10.0.0.2") == 200


def test_x_real_ip_can_be_the_trusted_header(client: Client, staff: User, settings: Any) -> None:
    settings.HOLODECK_CLIENT_IP_HEADER = "X-Real-IP"
    for _ in range(5):
        attempt(client, "/login/", "wrong", X_Real_IP="203.0.113.1")
    assert attempt(client, "/login/", "wrong", X_Real_IP="203.0.113.1") == 429
    assert attempt(client, "/login/", "wrong", X_Real_IP="203.0.113.2") == 200


# --- bearer tokens ----------------------------------------------------------------------------

ENDPOINTS = ["/api/v1/runs", "/api/v1/projects", "/api/v1/compare", "/api/v1/gate"]
METHODS = ["get", "post", "put", "patch", "delete"]


def revoked_secret() -> str:
    user = make_user("operator", staff=True)
    token, secret = token_create(user=user, name="ci")
    token_revoke(token=token)
    return secret


@pytest.mark.parametrize("kind", ["revoked", "unknown"])
def test_a_bad_bearer_token_is_a_401_on_every_method(kind: str) -> None:
    make_project()
    secret = revoked_secret() if kind == "revoked" else "hdw_" + "x" * 43
    api = Client(enforce_csrf_checks=True)
    for path in ENDPOINTS:
        for method in METHODS:
            headers = {"Authorization": f"Bearer {secret}"}
            if method == "get":
                response = api.get(path, headers=headers)
            else:
                send = getattr(api, method)
                response = send(path, data="{}", content_type="application/json", headers=headers)
            routed = response.status_code != 405  # a method the path does not have at all
            assert not routed or response.status_code == 401, (method, path, response.text)
            if routed:
                assert response.json()["detail"] == "Invalid or revoked token."
    assert (
        api.post("/api/v1/runs", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    )

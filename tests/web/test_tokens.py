"""The Tokens page (create, show once, list, revoke) and the ApiToken admin."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import ApiToken
from runs.services.tokens import MAX_ACTIVE_TOKENS, token_create
from tests.web.factories import make_user

pytestmark = pytest.mark.django_db

RUNS_API = "/api/v1/runs"
SECRET = re.compile(r"hdw_[A-Za-z0-9_-]{43}")


def create(client: Client, name: str) -> tuple[str, str | None]:
    """POST the form; returns the page and the secret it shows (None when none)."""
    response = client.post(reverse("tokens"), {"name": name})
    assert response.status_code == 200
    found = SECRET.findall(response.text)
    assert len(set(found)) <= 1
    return response.text, (found[0] if found else None)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


# --- creating -----------------------------------------------------------------------------------


def test_the_page_needs_a_login(client: Client) -> None:
    for response in (client.get(reverse("tokens")), client.post(reverse("tokens"), {"name": "x"})):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    assert not ApiToken.objects.exists()


def test_creating_a_token_shows_its_secret_once_and_only_its_digest_is_stored(
    viewer_client: Client, viewer: User
) -> None:
    response = viewer_client.post(reverse("tokens"), {"name": "  CI nightly  "})
    assert response.status_code == 200  # rendered in the POST response, not redirected
    assert "no-store" in response["Cache-Control"]
    html = response.text
    secret = SECRET.search(html)
    assert secret is not None
    assert "Copy it now, it will not be shown again." in html
    token = ApiToken.objects.get(user=viewer)
    assert token.name == "CI nightly"
    assert token.digest == hashlib.sha256(secret.group(0).encode()).hexdigest()
    assert token.prefix == secret.group(0)[:12]
    assert secret.group(0) not in str(dict(viewer_client.session))

    again = viewer_client.get(reverse("tokens"))
    assert secret.group(0) not in again.text
    assert not SECRET.search(again.text)
    assert f"{token.prefix}…" in again.text and "CI nightly" in again.text
    assert "copy it now" not in again.text.lower()


def test_the_shown_secret_works_against_the_api_until_it_is_revoked(
    viewer_client: Client, viewer: User
) -> None:
    _, secret = create(viewer_client, "script")
    assert secret is not None
    api = Client()
    assert api.get(RUNS_API, headers=bearer(secret)).status_code == 200
    token = ApiToken.objects.get(user=viewer)
    response = viewer_client.post(reverse("token_revoke", args=[token.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("tokens")
    assert "revoked." in response.text
    assert api.get(RUNS_API, headers=bearer(secret)).status_code == 401


def test_an_empty_or_blank_name_is_a_form_error(viewer_client: Client) -> None:
    for name in ("", "    "):
        html, secret = create(viewer_client, name)
        assert secret is None
        assert "This field is required." in html
    assert not ApiToken.objects.exists()


def test_a_name_longer_than_100_characters_is_a_form_error(viewer_client: Client) -> None:
    html, secret = create(viewer_client, "x" * 101)
    assert secret is None
    assert "at most 100 characters" in html
    assert not ApiToken.objects.exists()
    _, secret = create(viewer_client, "x" * 100 + "   ")  # stripped first: 100 is fine
    assert secret is not None
    assert ApiToken.objects.get().name == "x" * 100


def test_a_user_holds_at_most_50_active_tokens(viewer_client: Client, viewer: User) -> None:
    tokens = [token_create(user=viewer, name=f"t{i}")[0] for i in range(MAX_ACTIVE_TOKENS)]
    html, secret = create(viewer_client, "one too many")
    assert secret is None
    assert f"You already hold {MAX_ACTIVE_TOKENS} active tokens" in html
    assert ApiToken.objects.filter(user=viewer).count() == MAX_ACTIVE_TOKENS
    # Revoked tokens do not count, nor do other users' tokens.
    viewer_client.post(reverse("token_revoke", args=[tokens[0].pk]))
    token_create(user=make_user("other"), name="theirs")
    _, secret = create(viewer_client, "now it fits")
    assert secret is not None


def test_a_script_tag_in_a_token_name_renders_as_text(viewer_client: Client) -> None:
    name = '<script>alert("x")</script>'
    created, _ = create(viewer_client, name)
    listed = viewer_client.get(reverse("tokens")).text
    for html in (created, listed):
        assert name not in html
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


# --- listing and revoking -----------------------------------------------------------------------


def test_the_list_shows_only_the_users_own_tokens_with_their_status(
    viewer_client: Client, viewer: User
) -> None:
    mine, _ = token_create(user=viewer, name="mine")
    old, _ = token_create(user=viewer, name="old one")
    viewer_client.post(reverse("token_revoke", args=[old.pk]))
    token_create(user=make_user("other"), name="not yours")
    html = viewer_client.get(reverse("tokens")).text
    assert "not yours" not in html
    old.refresh_from_db()
    assert old.revoked_at is not None
    row = re.search(rf'<tr id="token-{old.pk}">.*?</tr>', html, re.S)
    assert row is not None and f"revoked {old.revoked_at:%Y-%m-%d}" in row.group(0)
    assert reverse("token_revoke", args=[old.pk]) not in html  # no button on a revoked token
    row = re.search(rf'<tr id="token-{mine.pk}">.*?</tr>', html, re.S)
    assert row is not None and "active" in row.group(0)
    assert reverse("token_revoke", args=[mine.pk]) in row.group(0)
    assert 'data-confirm="Revoke token' in row.group(0)


def test_revoking_someone_elses_token_is_a_404(viewer_client: Client) -> None:
    theirs, secret = token_create(user=make_user("other"), name="theirs")
    response = viewer_client.post(reverse("token_revoke", args=[theirs.pk]))
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active
    assert Client().get(RUNS_API, headers=bearer(secret)).status_code == 200
    assert viewer_client.post(reverse("token_revoke", args=[987654])).status_code == 404


def test_revoking_twice_says_it_was_revoked_already(viewer_client: Client, viewer: User) -> None:
    token, _ = token_create(user=viewer, name="twice")
    url = reverse("token_revoke", args=[token.pk])
    viewer_client.post(url)
    token.refresh_from_db()
    first = token.revoked_at
    response = viewer_client.post(url, follow=True)
    assert "was revoked already" in response.text
    token.refresh_from_db()
    assert token.revoked_at == first


def test_revoking_needs_a_post_and_its_csrf_token(viewer: User) -> None:
    token, _ = token_create(user=viewer, name="csrf")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(viewer)
    url = reverse("token_revoke", args=[token.pk])
    assert browser.get(url).status_code == 405
    assert browser.post(url).status_code == 403
    token.refresh_from_db()
    assert token.is_active


def test_the_page_explains_how_to_use_a_token(viewer_client: Client) -> None:
    html = viewer_client.get(reverse("tokens")).text
    assert 'curl -H "Authorization: Bearer hdw_…" http://testserver/api/v1/runs' in html
    assert 'href="/api/v1/docs"' in html


def test_the_nav_links_to_the_tokens_page(viewer_client: Client) -> None:
    html = viewer_client.get(reverse("home")).text
    assert f'<a href="{reverse("tokens")}">Tokens</a>' in html


# --- admin --------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", password="a-long-password"))
    return client


def test_the_admin_lists_and_searches_tokens_and_cannot_add_one(
    admin_client: Client, viewer: User
) -> None:
    token, secret = token_create(user=viewer, name="laptop")
    token_create(user=make_user("other"), name="ci")
    changelist = reverse("admin:runs_apitoken_changelist")
    html = admin_client.get(changelist).text
    assert "laptop" in html and token.prefix in html and "viewer" in html
    assert secret not in html
    found = admin_client.get(changelist, {"q": "laptop"}).text
    assert "laptop" in found and ">ci<" not in found
    assert "viewer" in admin_client.get(changelist, {"q": token.prefix}).text
    assert "laptop" in admin_client.get(changelist, {"q": "viewer"}).text
    assert admin_client.get(reverse("admin:runs_apitoken_add")).status_code == 403
    change = admin_client.get(reverse("admin:runs_apitoken_change", args=[token.pk])).text
    assert token.digest in change and secret not in change
    assert 'name="digest"' not in change  # read-only


def test_the_admin_action_revokes_the_selected_tokens(admin_client: Client, viewer: User) -> None:
    first, first_secret = token_create(user=viewer, name="one")
    second, _ = token_create(user=viewer, name="two")
    kept, _ = token_create(user=viewer, name="kept")
    response = admin_client.post(
        reverse("admin:runs_apitoken_changelist"),
        {"action": "revoke_tokens", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert "2 tokens revoked." in response.text
    assert not ApiToken.objects.get(pk=first.pk).is_active
    assert not ApiToken.objects.get(pk=second.pk).is_active
    assert ApiToken.objects.get(pk=kept.pk).is_active
    assert Client().get(RUNS_API, headers=bearer(first_secret)).status_code == 401

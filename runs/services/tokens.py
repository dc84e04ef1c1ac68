"""Personal API tokens: create (the secret is returned once), revoke, authenticate.

A token is ``hdw_`` + 43 URL-safe random characters; only its SHA-256 digest is stored, so a
database leak does not leak usable tokens.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from runs.models import ApiToken

TOKEN_PREFIX = "hdw_"
SHOWN_CHARACTERS = 12  # "hdw_" + 8: enough to tell tokens apart in a list
MAX_ACTIVE_TOKENS = 50  # per user: a leak stays traceable, and a runaway script stays bounded


class TokenLimitReached(Exception):
    """The user holds ``MAX_ACTIVE_TOKENS`` active tokens already: revoke one first."""


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_active_count(*, user: Any) -> int:
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).count()


def token_create(*, user: Any, name: str) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret (shown once, never stored).

    Raises ``TokenLimitReached`` when the user holds ``MAX_ACTIVE_TOKENS`` active tokens.
    """
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        # Lock the user's row so two concurrent creates cannot both pass the count (PostgreSQL;
        # SQLite serialises writers anyway).
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
        if token_active_count(user=user) >= MAX_ACTIVE_TOKENS:
            raise TokenLimitReached(f"at most {MAX_ACTIVE_TOKENS} active tokens per user")
        token = ApiToken.objects.create(
            user=user,
            name=name.strip()[:100] or "token",
            prefix=secret[:SHOWN_CHARACTERS],
            digest=token_digest(secret),
        )
    return token, secret


def token_revoke(*, token: ApiToken) -> bool:
    """Revoke a token (once); False when it was revoked already."""
    return bool(
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


def token_user(secret: str) -> Any | None:
    """The active user a token belongs to (None: unknown, revoked, or the user is inactive)."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=token_digest(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    return token.user

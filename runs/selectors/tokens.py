"""Reads of a user's personal API tokens (the Tokens page)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from runs.models import ApiToken


def token_list(*, user: Any) -> QuerySet[ApiToken]:
    """The user's tokens, revoked ones too (the model's order)."""
    return ApiToken.objects.filter(user=user)


def token_get(*, token_id: int, user: Any) -> ApiToken:
    """One of the user's tokens, or 404: someone else's token is as unknown as a missing one."""
    return get_object_or_404(ApiToken, pk=token_id, user=user)

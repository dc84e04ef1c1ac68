"""The Tokens page: create, list and revoke personal API tokens.

A new token's secret appears once, in the response to the POST that created it: it is never
stored (only its digest is), never put in the session or a redirect URL, and that response is
marked ``no-store`` so no cache keeps it either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from runs.selectors.tokens import token_get, token_list
from runs.services.tokens import (
    MAX_ACTIVE_TOKENS,
    TokenLimitReached,
    token_active_count,
    token_create,
)
from runs.services.tokens import token_revoke as revoke_token

if TYPE_CHECKING:
    from runs.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="What the token is for, e.g. “CI nightly” or “my laptop”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST if request.method == "POST" else None)
    created: ApiToken | None = None
    secret = ""
    if form.is_bound and form.is_valid():
        try:
            created, secret = token_create(user=request.user, name=form.cleaned_data["name"])
        except TokenLimitReached:
            form.add_error(None, _limit_message())
        else:
            form = TokenForm()  # the next token starts from an empty form
    return render(request, "runs/tokens.html", _context(request, form, created, secret))


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    # Only the owner may revoke: someone else's token is as unknown as a missing one.
    token = token_get(token_id=token_id, user=_owner(request))
    if revoke_token(token=token):
        messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked.")
    else:
        messages.info(request, f"Token “{token.name}” ({token.prefix}…) was revoked already.")
    return HttpResponseRedirect(reverse("tokens"))


def _context(
    request: HttpRequest, form: TokenForm, created: ApiToken | None, secret: str
) -> dict[str, Any]:
    return {
        "form": form,
        "created": created,
        "secret": secret,
        "tokens": token_list(user=_owner(request)),
        "active_count": token_active_count(user=request.user),
        "max_active": MAX_ACTIVE_TOKENS,
        "api_url": request.build_absolute_uri(reverse("api:run_list")),
        "docs_url": reverse("api:openapi-view"),
    }


def _owner(request: HttpRequest) -> User:
    """The logged-in user (the views are ``login_required``)."""
    assert isinstance(request.user, User)
    return request.user


def _limit_message() -> str:
    return (
        f"You already hold {MAX_ACTIVE_TOKENS} active tokens, the most allowed. "
        "Revoke one you no longer use, then create the new one."
    )

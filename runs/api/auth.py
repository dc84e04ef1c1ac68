"""Who may call the API: a personal token (``Authorization: Bearer hdw_...``) or the browser's
session (with its CSRF token on writes). What a caller may write depends on their role in the
project (``role_only``: launch, cancel, keep and re-run a run need the runner role in its
project); registering projects, importing and the audit log need staff (``staff_only``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuth

from runs.core.reviewing.vocabulary import Role
from runs.services.tokens import token_user
from runs.shared.access import refusal


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = token_user(token)
        if user is None:
            # A bearer header that does not name a live token is answered here, on every
            # method: falling through to the session auth would turn a POST into a 403
            # "CSRF check Failed" instead of the 401 the caller needs to see.
            raise HttpError(401, "Invalid or revoked token.")
        request.user = user
        return user


class BrowserSession(SessionAuth):
    """The browser's session, its CSRF token checked on writes. A request without a signed-in
    session is answered 401 (no session, nothing to forge: ninja's SessionAuth checks the CSRF
    token first, which turned an anonymous POST into a 403 "CSRF check Failed")."""

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)


API_AUTH = [BearerToken(), BrowserSession()]


def staff_only(request: HttpRequest, action: str) -> None:
    """403 unless the caller (token or session) is staff."""
    if not getattr(request.auth, "is_staff", False):  # type: ignore[attr-defined]
        raise HttpError(403, f"Only staff can {action}.")


def role_only(request: HttpRequest, *, project_id: int | None, needed: Role, action: str) -> None:
    """403 unless the caller holds ``needed`` (or a higher role) in the project, or is staff;
    its ``detail`` says which role in which project ``action`` needs."""
    why = refusal(user=request.auth, project_id=project_id, needed=needed, action=action)  # type: ignore[attr-defined]
    if why is not None:
        raise HttpError(403, why)

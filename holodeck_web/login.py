"""Login with throttling: after too many failed attempts from one address (for one user name,
or for all), further attempts are refused with 429 for a while, without checking the password.

The counters live in Django's cache (Redis when REDIS_URL is set, else the web process's
memory, which is what the single web process of ``serve`` needs).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        keys = _keys(request)
        if any(cache.get(key, 0) >= limit for key, limit in keys):
            return self._refused()
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            cache.delete(keys[0][0])
        else:
            for key, _ in keys:
                _bump(key)
        return response

    def _refused(self) -> HttpResponse:
        minutes = max(1, settings.HOLODECK_LOGIN_WINDOW_SECONDS // 60)
        form = self.get_form()
        form.add_error(
            None, f"Too many failed logins from your address; try again in {minutes} minutes."
        )
        return self.render_to_response(self.get_context_data(form=form), status=429)


def _keys(request: HttpRequest) -> list[tuple[str, int]]:
    address = request.META.get("REMOTE_ADDR", "unknown")
    username = str(request.POST.get("username", ""))[:150].lower()
    per_user = settings.HOLODECK_LOGIN_ATTEMPTS
    return [
        (f"login-fail:{address}:{username}", per_user),
        (f"login-fail:{address}", per_user * 4),
    ]


def _bump(key: str) -> None:
    window = settings.HOLODECK_LOGIN_WINDOW_SECONDS
    if cache.add(key, 1, timeout=window):
        return
    try:
        cache.incr(key)
    except ValueError:  # expired in between
        cache.add(key, 1, timeout=window)

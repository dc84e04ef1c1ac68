"""Login with throttling: after too many failed attempts from one address (for one user name,
or for all), further attempts are refused with 429 for a while, without checking the password.

Both ``/login/`` and ``/admin/login/`` go through it. The client's address comes from
``client_address``: REMOTE_ADDR, or the configured trusted proxy header.

The counters live in Django's cache (Redis when REDIS_URL is set, else the web process's
memory, which is what the single web process of ``serve`` needs).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
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


class ThrottledAdminLoginView(ThrottledLoginView):
    """The admin's login page with the admin's template and context, under the same throttle."""

    template_name = "admin/login.html"
    authentication_form = AdminAuthenticationForm  # staff only, as the admin's own view

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request))
        context.setdefault("title", "Log in")
        context.setdefault("site_header", admin.site.site_header)
        return context

    def get_success_url(self) -> str:
        return self.get_redirect_url() or "/admin/"


def client_address(request: HttpRequest) -> str:
    """The address every throttle keys on. A proxy header is trusted only when configured (it is
    trivially spoofed otherwise); X-Forwarded-For is read from the right, skipping the
    addresses the trusted proxies appended, so a client cannot pick its own bucket."""
    remote = str(request.META.get("REMOTE_ADDR") or "unknown")
    header = settings.HOLODECK_CLIENT_IP_HEADER
    if not header:
        return remote
    raw = str(request.META.get("HTTP_" + header.upper().replace("-", "_"), ""))
    hops = [hop.strip() for hop in raw.split(",") if hop.strip()]
    if not hops:
        return remote
    if header.lower() == "x-forwarded-for":
        # The last proxy appends the address it saw; with N proxies the client is N from the end.
        index = len(hops) - settings.HOLODECK_TRUSTED_PROXIES
        return hops[max(index, 0)][:64]
    return hops[-1][:64]


def _keys(request: HttpRequest) -> list[tuple[str, int]]:
    address = client_address(request)
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

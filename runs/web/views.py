"""The dashboard: plain function views, one template per screen, htmx fragments as partials.

An htmx request for a fragment renders ``"runs/<screen>.html#<partial>"`` of the same template
the full page uses, so the fragment and the page can never drift apart.

The pages live by screen (``home``, ``launch``, ``run_list``, ``run_page`` with its
``case_list``, ``cases``, ``projects``, ...); this module holds what they share: who may see
them, their page sizes and the 400 page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

RUNS_PER_PAGE = 50
# Case rows per page of the run page; "load more" fetches the next page with htmx. Keeps the
# page small and quick to draw whatever the number of cases.
CASES_PER_PAGE = 100
# htmx stops polling when it receives this status.
HTMX_STOP_POLLING = 286

View = Callable[..., HttpResponse]


class HtmxHttpRequest(HttpRequest):
    """What HtmxMiddleware adds to every request (for the type checker)."""

    htmx: HtmxDetails


def staff_required(view: View) -> View:
    """Logged-in users only (redirect to login); staff only beyond that (403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("Only staff can launch or cancel runs.")
        return view(request, *args, **kwargs)

    return wrapped


# --- errors --------------------------------------------------------------------------------


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 with the reason (a query parameter that failed validation says which and why)."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    if getattr(request, "htmx", False):
        return HttpResponse(message or "Bad request", status=400, content_type="text/plain")
    return render(request, "400.html", {"message": message}, status=400)

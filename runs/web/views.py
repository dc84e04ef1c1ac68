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
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django_htmx.middleware import HtmxDetails

if TYPE_CHECKING:
    from runs.models import Run

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


def form_page(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """A form's page: 400 when it answers a POST (the form refused, shown again with what is
    wrong), else 200."""
    status = 400 if request.method == "POST" else 200
    return render(request, template, context, status=status)


def run_page_redirect(run_id: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": run_id}))


def new_run_response(
    request: HttpRequest,
    original_id: int,
    create: Callable[[], Run],
    *,
    action: str,
    refused: type[Exception],
    done: Callable[[Run], str],
) -> HttpResponse:
    """A run made from another (a re-grade, a re-run) by ``create``, opened; the problems that
    stopped it (its agent.yaml's, or a ``refused``) are said on the original run's page, where
    ``action`` ("re-grade") "cannot" be done, and nothing is queued."""
    from runs.agentconfig.errors import ConfigError

    try:
        run = create()
    except ConfigError as exc:
        for line in exc.lines()[:10]:
            messages.error(request, f"Cannot {action}: {line}")
        return run_page_redirect(original_id)
    except refused as exc:
        messages.error(request, f"Cannot {action}: {exc}")
        return run_page_redirect(original_id)
    messages.success(request, done(run))
    return run_page_redirect(run.pk)


# --- errors --------------------------------------------------------------------------------


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 with the reason (a query parameter that failed validation says which and why)."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    if getattr(request, "htmx", False):
        return HttpResponse(message or "Bad request", status=400, content_type="text/plain")
    return render(request, "400.html", {"message": message}, status=400)

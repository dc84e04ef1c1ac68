"""The dashboard: plain function views, one template per screen, htmx fragments as partials.

An htmx request for a fragment renders ``"runs/<screen>.html#<partial>"`` of the same template
the full page uses, so the fragment and the page can never drift apart.

The pages live by screen (``home``, ``launch``, ``run_list``, ``run_page`` with its
``case_list``, ``cases``, ``projects``, ...); this module holds what they share: who may see
them and act on them (staff, or a role in the project: ``role_required``), their page sizes
and the 400 page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.defaults import page_not_found
from django_htmx.middleware import HtmxDetails

from runs import selectors
from runs.core.agentconfig.errors import ConfigError
from runs.core.reviewing.vocabulary import Role
from runs.shared.access import refusal

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
    """Logged-in users only (redirect to login); staff only beyond that (403): registering a
    project, importing results."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("Only staff can register projects or import results.")
        return view(request, *args, **kwargs)

    return wrapped


# Which project a view's URL acts in, from its keyword arguments (404 when there is no such
# run or project; None: a run of no project, for staff only).
ProjectOf = Callable[[dict[str, Any]], "int | None"]


def project_of_run(kwargs: dict[str, Any]) -> int | None:
    """The project of the run ``run_id`` names."""
    return selectors.run_row(run_id=kwargs["run_id"], only=("id", "project_id")).project_id


def project_of_page(kwargs: dict[str, Any]) -> int:
    """The project ``project_id`` names."""
    return int(selectors.project_get(project_id=kwargs["project_id"]).pk)


def role_required(needed: Role, *, action: str, project_of: ProjectOf) -> Callable[[View], View]:
    """Logged-in users only (redirect to login); beyond that, ``needed`` (or a higher role) in
    the project ``project_of`` finds, or staff: else 403 saying who may ``action``."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            project_id = project_of(kwargs)
            why = refusal(user=request.user, project_id=project_id, needed=needed, action=action)
            if why is not None:
                raise PermissionDenied(why)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


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


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: the page for people; under /api/ the API's JSON (``{"detail": "Not Found"}``), also
    for a path no endpoint matches (a name with a newline in its path segment)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not Found"}, status=404)
    return page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 with the reason (a query parameter that failed validation says which and why)."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    if getattr(request, "htmx", False):
        return HttpResponse(message or "Bad request", status=400, content_type="text/plain")
    return render(request, "400.html", {"message": message}, status=400)

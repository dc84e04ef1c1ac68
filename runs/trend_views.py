"""Trends over a project's runs: pass rate and per-metric averages in commit order."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@login_required
@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    """``/trends/?project=ID`` (or ``?agent=NAME`` for imported runs without a project)."""
    return HttpResponse("trends: not built yet", status=501)

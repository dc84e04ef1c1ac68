"""Compare runs: headline deltas, the case x turn matrix, per-turn side-by-side, config diff."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    return HttpResponse("compare: not built yet", status=501)


@login_required
@require_GET
def compare_case(request: HttpRequest) -> HttpResponse:
    return HttpResponse("compare case: not built yet", status=501)


@login_required
@require_GET
def compare_config(request: HttpRequest) -> HttpResponse:
    return HttpResponse("compare config: not built yet", status=501)

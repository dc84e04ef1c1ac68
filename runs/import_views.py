"""Import HoloDeck result files from the browser."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods


@login_required
@require_http_methods(["GET", "POST"])
def import_results(request: HttpRequest) -> HttpResponse:
    return HttpResponse("import: not built yet", status=501)

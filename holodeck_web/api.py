"""The HTTP API: one NinjaAPI under /api/v1 mounting the routers of the runs app.

Every error is JSON ``{"detail": ...}`` with a 4xx code: 401 without a valid token or session,
403 for an action the caller may not take, 404, 409 (cancelling a finished run), 422 with field
errors for input that does not validate.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI, Swagger
from ninja.openapi.docs import _csrf_needed
from ninja.parser import Parser

from runs.api import (
    audit,
    calibration,
    imports,
    projects,
    replays,
    reruns,
    reviews,
    runs,
    snapshots,
)
from runs.api.auth import API_AUTH
from runs.compare import api as compare
from runs.compare import gate_api as gate


class LocalSwagger(Swagger):
    """The docs page (/api/v1/docs) with Swagger UI from django-ninja's own static files and an
    init script of ours (static/js/api-docs.js): ninja's default loads it from a CDN, which the
    page's CSP (script-src 'self') blocks, and the machine may have no internet at all."""

    template = "api/docs.html"

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        context = {
            "api": api,
            "openapi_url": self.get_openapi_url(api, kwargs),
            "add_csrf": _csrf_needed(api),
        }
        return render(request, self.template, context)


class SingleValueParser(Parser):
    """Query strings and forms as the schema documents them: a parameter that takes one value
    and is given several (``?branch=a&branch=b``) fails validation (422) instead of quietly
    keeping the last one."""

    def parse_querydict(
        self, data: MultiValueDict[str, Any], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, values in data.lists():
            result[key] = values if key in list_fields or len(values) > 1 else values[0]
        return result


api = NinjaAPI(
    title="HoloDeck Web API",
    version="1",
    description=(
        "Launch, follow, compare, import and export agent test runs. Authenticate with a "
        "personal token (`Authorization: Bearer hdw_...`, created on the Tokens page) or the "
        "browser's session."
    ),
    auth=API_AUTH,
    urls_namespace="api",
    docs=LocalSwagger(),
    parser=SingleValueParser(),
)
api.add_router("/", projects.router)
api.add_router("/", runs.router)
api.add_router("/", reruns.router)
api.add_router("/", replays.router)
api.add_router("/", snapshots.router)
api.add_router("/", compare.router)
api.add_router("/", imports.router)
api.add_router("/", gate.router)
api.add_router("/", audit.router)
api.add_router("/", calibration.router)
api.add_router("/", reviews.router)


@api.exception_handler(BadRequest)
def bad_request(request: HttpRequest, exc: BadRequest) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=400)

"""The home page: the projects, each with its last run."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs import selectors
from runs.web.rows import project_rows_html


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    projects = selectors.projects_with_last_run()
    context = {
        "projects": projects,
        "project_rows_html": project_rows_html(projects, staff=request.user.is_staff),
    }
    return render(request, "runs/home.html", context)

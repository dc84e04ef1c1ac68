"""The home page: the projects, each with its last run."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.shared.access import role_in
from runs.web.row_html import project_rows_html


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    projects = selectors.projects_with_last_run()

    def may_launch(project_id: int) -> bool:  # the user's roles: one query, none for staff
        role = role_in(user=request.user, project_id=project_id)
        return role is not None and role.allows(Role.RUNNER)

    context = {
        "projects": projects,
        "project_rows_html": project_rows_html(projects, may_launch=may_launch),
    }
    return render(request, "runs/home.html", context)

"""Re-grade a finished run from its page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.services.launch import LaunchError
from runs.services.regrade import run_regrade_create
from runs.web.views import new_run_response, project_of_run, role_required, run_page_redirect


class RegradeForm(forms.Form):
    git_ref = forms.CharField(required=False, max_length=200)
    # Rendered with the run page: a double submit answers with the first re-grade.
    idempotency_key = forms.CharField(required=False, max_length=100)


@role_required(Role.RUNNER, action="re-grade runs", project_of=project_of_run)
@require_POST
def run_regrade(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a re-grade of the run with its project's agent.yaml (now, or at a git ref) and
    open it; problems are shown on the original run's page, nothing is queued then."""

    original = selectors.run_row(run_id=run_id)
    form = RegradeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The git ref (or the form's idempotency key) is too long.")
        return run_page_redirect(original.pk)
    return new_run_response(
        request,
        original.pk,
        lambda: run_regrade_create(
            original=original,
            user=request.user,
            git_ref=form.cleaned_data["git_ref"],
            idempotency_key=form.cleaned_data["idempotency_key"].strip(),
        ),
        action="re-grade",
        refused=LaunchError,
        done=lambda run: f"Re-grading run {original.pk} as run {run.pk}.",
    )

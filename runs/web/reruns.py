"""Re-run a settled run's failed cases, or one of its cases, from its pages."""

from __future__ import annotations

import re

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.services.launch import LaunchError
from runs.services.rerun import run_rerun as rerun
from runs.web.views import new_run_response, project_of_run, role_required, run_page_redirect


class RerunForm(forms.Form):
    # "failed", or a case's index (the case page's button): ASCII digits, nothing after them
    # (``$`` would let a final newline through, ``\d`` every script's digits).
    cases = forms.RegexField(regex=re.compile(r"\A(?:failed|[0-9]{1,9})\Z", re.ASCII))
    # Rendered with the page: a double submit answers with the first re-run.
    idempotency_key = forms.CharField(required=False, max_length=100)


@role_required(Role.RUNNER, action="re-run runs", project_of=project_of_run)
@require_POST
def run_rerun(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a re-run of the run's failed cases (or of one case) at its snapshot and open it;
    problems are shown on the original run's page, nothing is queued then."""

    original = selectors.run_row(run_id=run_id)
    form = RerunForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Cannot re-run: say which cases (failed, or a case's index).")
        return run_page_redirect(original.pk)
    picked = form.cleaned_data["cases"]
    what = "failed cases" if picked == "failed" else f"case of index {picked}"
    return new_run_response(
        request,
        original.pk,
        lambda: rerun(
            original=original,
            cases="failed" if picked == "failed" else int(picked),
            user=request.user,
            idempotency_key=form.cleaned_data["idempotency_key"].strip(),
        ),
        action="re-run",
        refused=LaunchError,  # a RerunError, or its idempotency key's refusal
        done=lambda run: f"Re-running run {original.pk}'s {what} as run {run.pk}.",
    )

"""Re-grade a finished run from its page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs import selectors
from runs.web.views import staff_required


class RegradeForm(forms.Form):
    git_ref = forms.CharField(required=False, max_length=200)
    # Rendered with the run page: a double submit answers with the first re-grade.
    idempotency_key = forms.CharField(required=False, max_length=100)


@staff_required
@require_POST
def run_regrade(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a re-grade of the run with its project's agent.yaml (now, or at a git ref) and
    open it; problems are shown on the original run's page, nothing is queued then."""
    from runs.agentconfig.errors import ConfigError
    from runs.services.launch import LaunchError
    from runs.services.regrade import run_regrade_create

    original = selectors.run_row(run_id=run_id)
    form = RegradeForm(request.POST)
    back = HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": original.pk}))
    if not form.is_valid():
        messages.error(request, "The git ref (or the form's idempotency key) is too long.")
        return back
    try:
        run = run_regrade_create(
            original=original,
            user=request.user,
            git_ref=form.cleaned_data["git_ref"],
            idempotency_key=form.cleaned_data["idempotency_key"].strip(),
        )
    except ConfigError as exc:
        for line in exc.lines()[:10]:
            messages.error(request, f"Cannot re-grade: {line}")
        return back
    except LaunchError as exc:
        messages.error(request, f"Cannot re-grade: {exc}")
        return back
    messages.success(request, f"Re-grading run {original.pk} as run {run.pk}.")
    return HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": run.pk}))

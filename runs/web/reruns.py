"""Re-run a settled run's failed cases, or one of its cases, from its pages."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs import selectors
from runs.web.views import staff_required


class RerunForm(forms.Form):
    # "failed", or a case's index (the case page's button).
    cases = forms.RegexField(regex=r"^(failed|\d{1,9})$")
    # Rendered with the page: a double submit answers with the first re-run.
    idempotency_key = forms.CharField(required=False, max_length=100)


@staff_required
@require_POST
def run_rerun(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a re-run of the run's failed cases (or of one case) at its snapshot and open it;
    problems are shown on the original run's page, nothing is queued then."""
    from runs.agentconfig.errors import ConfigError
    from runs.services.rerun import RerunError
    from runs.services.rerun import run_rerun as rerun

    original = selectors.run_row(run_id=run_id)
    form = RerunForm(request.POST)
    back = HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": original.pk}))
    if not form.is_valid():
        messages.error(request, "Cannot re-run: say which cases (failed, or a case's index).")
        return back
    picked = form.cleaned_data["cases"]
    try:
        run = rerun(
            original=original,
            cases="failed" if picked == "failed" else int(picked),
            user=request.user,
            idempotency_key=form.cleaned_data["idempotency_key"].strip(),
        )
    except ConfigError as exc:
        for line in exc.lines()[:10]:
            messages.error(request, f"Cannot re-run: {line}")
        return back
    except RerunError as exc:
        messages.error(request, f"Cannot re-run: {exc}")
        return back
    what = "failed cases" if picked == "failed" else f"case of index {picked}"
    messages.success(request, f"Re-running run {original.pk}'s {what} as run {run.pk}.")
    return HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": run.pk}))

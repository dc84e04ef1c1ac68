"""A case's turns (the fragment an opened case row loads, polled while the case runs) and the
case's own page."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs import selectors
from runs.core.verdicts.outcomes import CaseState
from runs.selectors.costs import pricing_for
from runs.selectors.reruns import run_rerunnable
from runs.web.params import flag_param, text_param
from runs.web.reviews import case_panels

if TYPE_CHECKING:
    from runs.models import CaseRow


@login_required
@require_GET
def case_turns(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """The turns of one case: the fragment an expanded case row loads.

    While the case runs, the fragment polls itself with ``v`` (the ``case_version`` it shows):
    204 while that is the same, else the fragment again with the turns written since — and
    without the poll once the case has settled. ``whole=1`` is the case page's poll: once the
    case has settled the page reloads (``HX-Refresh``), since its header and tiles change too.
    """
    shown = text_param(request, "v", max_length=100)
    whole = flag_param(request, "whole")
    if shown:
        running, version = selectors.case_version_get(run_id=run_id, case_id=case_id)
        if version == shown:
            return HttpResponse(status=204)
        if whole and not running:
            return HttpResponse(headers={"HX-Refresh": "true"})
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    # Several cases can be expanded on one page: their turn anchors must not collide (the case
    # page's own poll, ``whole``, keeps the page's plain anchors and its switcher's links).
    context = {
        **_case_turns_context(case, whole=whole),
        **case_panels(user=request.user, case=case),
        "anchor_prefix": "" if whole else f"case-{case.pk}-",
        "pricing": pricing_for(run_id=run_id),
    }
    return render(request, "runs/case_detail.html#case_turns", context)


def _case_turns_context(case: CaseRow, *, whole: bool = False) -> dict[str, Any]:
    """What the turns fragment needs besides its anchors and prices: while the case runs, the
    version it polls with and the turn it waits for."""
    written = len(case.turns.all())
    repeats = selectors.case_run_repeats(case)
    return {
        "case": case,
        "run": case.run,
        "case_live": CaseState(case.status).is_running,
        "case_version": selectors.case_version(status=case.status, turns=written),
        "turn_running": written,  # the index of the turn being answered while it runs
        "whole": whole,
        **(_repetitions_context(case, repeats) if repeats > 1 else {}),
    }


def _repetitions_context(case: CaseRow, repeats: int) -> dict[str, Any]:
    """A repeated case's switcher (its repetitions) and its stats over them: per turn, and
    per metric its scores' mean and spread (three queries)."""
    turn_stats = selectors.turn_repeat_stats(case=case)
    return {
        "repeats": repeats,
        "repetitions": selectors.case_repetitions(case=case),
        "turn_stats": [(index, turn_stats[index]) for index in sorted(turn_stats)],
        "score_spreads": selectors.case_score_spreads(case=case),
    }


@login_required
@require_GET
def case_detail(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """A stable page for one case, rendered expanded (anchors ``#turn-N`` point into it)."""
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    context = {
        **_case_turns_context(case, whole=True),
        # The review panels of its failing turns and of the case itself (runs.web.reviews).
        **case_panels(user=request.user, case=case),
        # Its run's cases, not their repetitions ("case 2 of 3" of a run of 3 cases × 5).
        "case_total": case.run.total_cases // selectors.case_run_repeats(case),
        "summary": selectors.case_summary(case=case),
        "anchor_prefix": "",
        "next_failed": selectors.next_failed_case(case=case),
        "pricing": pricing_for(run_id=run_id),
        # "Re-run this case" (staff's): its form's idempotency key, None when it cannot be.
        "rerun_case_key": uuid.uuid4().hex if run_rerunnable(case.run) else None,
    }
    return render(request, "runs/case_detail.html", context)

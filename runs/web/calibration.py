"""Judges checked against people: a project's metrics (LLM judges, code graders, deterministic
ones) each with how it agrees with the people who reviewed its turns, and one metric's page
with its verdicts beside people's, the confusion matrix, agreement, Cohen's kappa with its
interval, the disagreements (linked to their turns) and the threshold that would agree best
(shown, never applied). Reads only (``runs.selectors.calibration``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs import selectors
from runs.core.reviewing.agreement import Agreement, kappa_reading
from runs.core.verdicts.kinds import KIND_LABELS, METRIC_KINDS
from runs.core.verdicts.numbers import NONE_TEXT, format_score
from runs.selectors.calibration import metric_calibration, project_calibration
from runs.web.params import choice_param, text_param


@dataclass(frozen=True)
class AgreementView:
    """How an agreement reads on the pages."""

    agreement: Agreement

    @property
    def rate(self) -> str:
        rate = self.agreement.rate
        return NONE_TEXT if rate is None else f"{rate * 100:.0f}%"

    @property
    def kappa(self) -> str:
        kappa = self.agreement.kappa
        return NONE_TEXT if kappa is None else f"{kappa.value:.2f}"

    @property
    def interval(self) -> str:
        kappa = self.agreement.kappa
        return "" if kappa is None else f"[{kappa.low:.2f}, {kappa.high:.2f}]"

    @property
    def wide(self) -> bool:
        """The asymptotic interval reaches past kappa's bounds (few turns)."""
        kappa = self.agreement.kappa
        return kappa is not None and (kappa.low < -1 or kappa.high > 1)

    @property
    def reading(self) -> str:
        kappa = self.agreement.kappa
        return kappa_reading(None if kappa is None else kappa.value)

    @property
    def threshold(self) -> str:
        return format_score(self.agreement.threshold)

    @property
    def best_threshold(self) -> str:
        best = self.agreement.best
        return NONE_TEXT if best is None else format_score(best.threshold)


@login_required
@require_GET
def calibration(request: HttpRequest, project_id: int, metric: str = "") -> HttpResponse:
    """``/projects/<id>/calibration/`` (``?kind=`` one metric kind), or one metric's page:
    ``/projects/<id>/calibration/<metric>/`` or ``?metric=``."""
    project = selectors.project_get(project_id=project_id)
    name = metric or text_param(request, "metric")
    if name:
        return _metric_page(request, project.pk, name, project)
    kind = choice_param(request, "kind", METRIC_KINDS)
    agreements = project_calibration(project_id=project.pk, kind=kind)
    context = {
        "project": project,
        "metrics": [AgreementView(agreement) for agreement in agreements],
        "kind": kind,
        "kinds": [(value, KIND_LABELS[value]) for value in METRIC_KINDS],
    }
    return render(request, "runs/calibration.html", context)


def _metric_page(request: HttpRequest, project_id: int, name: str, project: object) -> HttpResponse:
    found = metric_calibration(project_id=project_id, metric=name)
    agreement = found.agreement
    context = {
        "project": project,
        "metric": name,
        "found": found,
        "view": AgreementView(agreement),
        "confusion": agreement.confusion,
        "best": agreement.best,
        "turns": found.turns,
        "disagreeing": found.disagreeing,
    }
    return render(request, "runs/calibration_metric.html", context)

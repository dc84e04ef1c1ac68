"""Judges checked against people: per project, each metric's agreement with the human
verdicts of the turns people reviewed (confusion matrix, raw agreement, Cohen's kappa with its
95 % interval, the best-agreeing threshold: shown, never applied), and one metric's reviewed
turns with its disagreements. Reads: any signed-in caller."""

from typing import Any, Literal

from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router, Schema

from runs import selectors
from runs.api.schemas import Id, SafeText, responses
from runs.core.reviewing.agreement import Agreement
from runs.selectors.calibration import ReviewedTurn, metric_calibration, project_calibration

router = Router(tags=["calibration"])


class KappaOut(Schema):
    """Cohen's kappa and its confidence interval (statsmodels)."""

    value: float
    low: float
    high: float
    confidence: float


class ConfusionOut(Schema):
    """Rows the metric's verdict, columns people's: ``false_pass`` the metric passed where
    people say fail, ``false_fail`` the metric failed where people say pass."""

    both_pass: int
    false_pass: int
    false_fail: int
    both_fail: int


class BestThresholdOut(Schema):
    """The threshold over the reviewed turns' scores that agrees best with people, the turns
    it agrees on of the scored ones, and how many the current verdicts agree on (shown, never
    applied)."""

    threshold: float
    agreed: int
    total: int
    current_agreed: int
    current_threshold: float | None


class AgreementOut(Schema):
    """One metric over the reviewed turns: ``n`` compared, ``unsure`` (people could not tell)
    and ``ungraded`` (the metric gave no verdict: error, not graded, skipped) left out;
    ``agreement`` raw, 0..1; ``kappa`` null when undefined (no turn, or one class only)."""

    metric: str
    kinds: list[str]
    n: int
    agreed: int
    agreement: float | None
    kappa: KappaOut | None
    confusion: ConfusionOut
    unsure: int
    ungraded: int
    threshold: float | None
    best_threshold: BestThresholdOut | None
    summary: str


class ReviewedTurnOut(Schema):
    """One reviewed turn: where it is (``turn_index`` 0-based; ``url`` its case page at the
    turn), the metric's outcome and score, people's verdict on the turn, and whether they
    agree (null: left out)."""

    turn_id: int
    run_id: int
    case_id: int
    case: str
    turn_index: int
    outcome: str
    score: float | None
    human_verdict: str
    machine_passed: bool | None
    human_passed: bool | None
    agrees: bool | None
    url: str


class MetricCalibrationOut(AgreementOut):
    disagreements: list[ReviewedTurnOut]
    turns: list[ReviewedTurnOut]


class ProjectCalibrationOut(Schema):
    project_id: int
    kind: str
    metrics: list[AgreementOut]


class CalibrationFilter(Schema):
    kind: Literal["", "standard", "rag", "geval", "code"] = ""


@router.get(
    "/projects/{project_id}/calibration",
    response=responses({200: ProjectCalibrationOut}, 404),
    summary="Every metric of the project's runs with its agreement with people",
)
def calibration(request: HttpRequest, project_id: Id, filters: Query[CalibrationFilter]) -> object:
    project = selectors.project_get(project_id=project_id)
    agreements = project_calibration(project_id=project.pk, kind=filters.kind)
    return {
        "project_id": project.pk,
        "kind": filters.kind,
        "metrics": [agreement_out(agreement) for agreement in agreements],
    }


@router.get(
    "/projects/{project_id}/calibration/{path:metric}",
    response=responses({200: MetricCalibrationOut}, 404),
    summary="One metric against people: its reviewed turns and its disagreements",
)
def calibration_metric(request: HttpRequest, project_id: Id, metric: SafeText) -> object:
    project = selectors.project_get(project_id=project_id)
    found = metric_calibration(project_id=project.pk, metric=metric)
    return {
        **agreement_out(found.agreement),
        "disagreements": [_turn_out(turn) for turn in found.disagreeing],
        "turns": [_turn_out(turn) for turn in found.turns],
    }


def agreement_out(agreement: Agreement) -> dict[str, Any]:
    kappa, best, confusion = agreement.kappa, agreement.best, agreement.confusion
    return {
        "metric": agreement.metric,
        "kinds": list(agreement.kinds),
        "n": agreement.n,
        "agreed": agreement.agreed,
        "agreement": agreement.rate,
        "kappa": None if kappa is None else vars(kappa),
        "confusion": vars(confusion),
        "unsure": agreement.unsure,
        "ungraded": agreement.not_graded,
        "threshold": agreement.threshold,
        "best_threshold": None if best is None else vars(best),
        "summary": agreement.summary,
    }


def _turn_out(turn: ReviewedTurn) -> dict[str, Any]:
    judged = turn.judged
    case_url = reverse("case_detail", kwargs={"run_id": turn.run_id, "case_id": turn.case_id})
    return {
        "turn_id": turn.turn_id,
        "run_id": turn.run_id,
        "case_id": turn.case_id,
        "case": turn.case_label,
        "turn_index": turn.index,
        "outcome": judged.outcome,
        "score": judged.score,
        "human_verdict": judged.verdict,
        "machine_passed": judged.machine_passed,
        "human_passed": judged.human_passed,
        "agrees": turn.agrees,
        "url": f"{case_url}#turn-{turn.number}",
    }

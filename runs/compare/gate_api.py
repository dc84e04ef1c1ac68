"""The CI gate: compare a run with its baseline and say whether it may merge (read-only)."""

from typing import Annotated

from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.errors import HttpError

from runs.api.schemas import ErrorOut, Id, SafeText
from runs.compare.api import Kind
from runs.compare.gate import (
    GateError,
    gate_baseline,
    gate_evaluate,
    gate_run,
    ignore_triaged_parse,
    public_url,
)
from runs.core.verdicts.summary import MetricSummary, RunSummary
from runs.core.writers.gate_markdown import GateOptions

router = Router(tags=["gate"])

Drop = Annotated[float, Field(ge=0, le=1e9)]


class GateIn(Schema):
    run: Id
    baseline: Id | SafeText = Field(
        default="parent-commit",
        description="a run id, `parent-commit` (the compare page's rule) or `latest:<branch>`",
    )
    max_regressions: int = Field(default=0, ge=0, le=1_000_000, description="regressed turns")
    min_pass_rate: float | None = Field(default=None, ge=0, le=100)
    kinds: list[Kind] = Field(
        default_factory=list, description="count regressions and metrics for these kinds only"
    )
    max_metric_drop: dict[SafeText, Drop] = Field(
        default_factory=dict, description="metric name -> the drop of its average allowed"
    )
    significant_only: bool = Field(
        default=False,
        description="count only significant regressions, over the runs' repetitions and the "
        "other finished runs of both commits (docs/significance.md)",
    )
    alpha: float = Field(default=0.05, gt=0, lt=1, description="the false discovery rate")
    ignore_triaged: list[SafeText] = Field(
        default_factory=list,
        max_length=100,
        description="triage categories of the run's project whose failures leave the verdict: "
        "regressed turns people triaged into them (their own review, or a known one carried "
        "from an earlier run) are not counted, nor the cases whose every failure was in the "
        "pass rate; they are listed under `triaged`",
    )


class RegressedCaseOut(Schema):
    key: str
    turns: list[int] = Field(description="the regressed turns' stored indexes (from 0)")
    url: str


class NoisyTurnOut(Schema):
    key: str
    turn: int = Field(description="the turn's stored index (from 0)")
    passed_before: int = Field(description="of n_before graded outcomes on the baseline's side")
    n_before: int
    passed_after: int = Field(description="of n_after graded outcomes on the run's side")
    n_after: int
    url: str


class GateSignificanceOut(Schema):
    worse: int = Field(description="turns significantly worse")
    better: int = Field(description="turns significantly better")
    noise: int = Field(description="turns whose verdict changed within noise")
    text: str
    difference: float | None = Field(description="pass-rate change, in points")
    ci_low: float | None
    ci_high: float | None
    confidence: float
    before_runs: list[int]
    after_runs: list[int]
    regressed: list[RegressedCaseOut] = Field(
        description="the significantly worse turns, by case (`worse` turns in all)"
    )
    noise_turns: list[NoisyTurnOut] = Field(
        description="the turns whose pass rate changed within noise (`noise` of them)"
    )


class TriagedTurnOut(Schema):
    key: str
    turn: int = Field(description="the turn's stored index (from 0)")
    category: str
    by: str = Field(description="who triaged it")
    note: str
    carried_from_run: int | None = Field(
        description="the earlier run its review was made on (a known review carried here)"
    )
    url: str


class MetricChangeOut(Schema):
    name: str
    kind: str
    before: float | None
    after: float | None
    limit: float | None
    over_limit: bool
    turns: MetricSummary | None = Field(description="the run's counts of it, per turn")


class GateOut(Schema):
    passed: bool
    reasons: list[str]
    run: int
    baseline_run: int
    baseline_rule: str
    regressions: int
    fixes: int
    pass_rate: float | None
    baseline_pass_rate: float | None
    summary: RunSummary = Field(description="the run's stored summary: its run page's numbers")
    baseline_summary: RunSummary
    regressed: list[RegressedCaseOut]
    metrics: list[MetricChangeOut]
    compare_url: str
    markdown: str
    significance: GateSignificanceOut | None = Field(
        default=None, description="with significant_only: what the samples say"
    )
    triaged: list[TriagedTurnOut] = Field(
        default_factory=list,
        description="with ignore_triaged: the regressed turns left out of the verdict (counted "
        "in `regressions`, not in `regressed`)",
    )
    triaged_cases: int = Field(
        default=0, description="failing cases left out of the pass rate checked"
    )
    triaged_pass_rate: float | None = Field(
        default=None, description="the pass rate without them (null when none was left out)"
    )


# 400: a body that is not JSON; 401: no or a bad token.
ERRORS = {code: ErrorOut for code in (400, 401, 404, 422)}


@router.post("/gate", response={200: GateOut, **ERRORS})
def gate(request: HttpRequest, payload: GateIn) -> object:
    try:
        run = gate_run(payload.run)
        baseline = gate_baseline(run, payload.baseline)
        result = gate_evaluate(
            run,
            baseline,
            GateOptions(
                max_regressions=payload.max_regressions,
                min_pass_rate=payload.min_pass_rate,
                kinds=tuple(dict.fromkeys(payload.kinds)),
                max_metric_drop=dict(payload.max_metric_drop),
                significant_only=payload.significant_only,
                alpha=payload.alpha,
                ignore_triaged=ignore_triaged_parse(payload.ignore_triaged, commas=False),
                # HOLODECK_PUBLIC_URL, else the address the caller reached us at
                base_url=public_url(request.build_absolute_uri("/")),
            ),
        )
    except GateError as exc:
        raise HttpError(exc.status, exc.message) from exc
    return {
        "passed": result.passed,
        "reasons": result.reasons,
        "run": run.pk,
        "baseline_run": result.baseline.id,
        "baseline_rule": result.baseline_rule,
        "regressions": result.regressions,
        "fixes": result.fixes,
        "pass_rate": result.pass_rate,
        "baseline_pass_rate": result.baseline_pass_rate,
        "summary": result.run.summary,
        "baseline_summary": result.baseline.summary,
        "regressed": result.regressed,
        "metrics": [
            {**vars(change), "over_limit": change.over_limit} for change in result.metric_changes
        ],
        "compare_url": result.compare_url,
        "markdown": result.markdown,
        "significance": vars(result.significance) if result.significance else None,
        "triaged": result.triaged,
        "triaged_cases": result.triaged_cases,
        "triaged_pass_rate": result.triaged_pass_rate if result.triaged_cases else None,
    }

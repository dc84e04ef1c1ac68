"""Runs: launch, list, detail, progress, cancel; a run's cases; a case's turns; export."""

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError
from ninja.pagination import LimitOffsetPagination, paginate

from runs import selectors
from runs.api.auth import staff_only
from runs.api.schemas import Id, SafeText, responses
from runs.web.exports import run_export_response

if TYPE_CHECKING:
    from runs.models import Run

router = Router(tags=["runs"])

RunStatus = Literal["queued", "running", "passed", "failed", "error", "cancelled"]


class RunOut(Schema):
    id: int
    project_id: int | None
    agent_name: str
    status: str
    source: str
    git_ref: str
    git_commit: str
    git_branch: str
    git_dirty: bool
    prompt_version: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    total_cases: int
    cases_done: int
    total_turns: int
    turns_done: int
    passed_cases: int
    failed_cases: int
    pass_rate: float | None
    duration_ms: int | None
    total_tokens: int
    url: str

    @staticmethod
    def resolve_url(run: "Run") -> str:
        return run.get_absolute_url()


class MetricSummaryOut(Schema):
    name: str
    kind: str
    average: float | None
    count: int
    passed: int
    errors: int


class RunDetailOut(RunOut):
    error: str
    not_graded_cases: int
    cancelled_cases: int
    parallel: int | None
    limit: int | None
    case_filter: str
    metrics_evaluated: dict[str, int]
    average_scores: dict[str, float]
    metric_summary: list[MetricSummaryOut]


class RunLaunchIn(Schema):
    """The launch form's options."""

    project: Id
    git_ref: SafeText = ""
    parallel: int | None = Field(default=None, ge=1, le=64)
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    case_filter: SafeText = ""


class ProgressOut(Schema):
    id: int
    status: str
    active: bool
    percent: int
    total_cases: int
    cases_done: int
    total_turns: int
    turns_done: int
    passed_cases: int
    failed_cases: int
    pass_rate: float | None


class RunFilters(Schema):
    project: Id | None = None
    status: RunStatus | None = None
    branch: SafeText | None = None
    commit: SafeText | None = Field(default=None, description="a commit prefix")


@router.get("/runs", response=responses({200: list[RunOut]}))
@paginate(LimitOffsetPagination)
def run_list(request: HttpRequest, filters: Query[RunFilters]) -> object:
    return selectors.run_list(
        filters=selectors.RunListFilters(
            project_id=filters.project,
            status=filters.status or "",
            commit=filters.commit or "",
            branch=filters.branch or "",
        )
    )


@router.post("/runs", response=responses({201: RunOut}, 403, 404, 422))
def run_launch(request: HttpRequest, payload: RunLaunchIn) -> object:
    staff_only(request, "launch runs")
    from runs.services.launch import LaunchError, run_create
    from runs.spec.errors import ConfigError

    project = selectors.project_get(project_id=payload.project)
    try:
        run = run_create(
            project=project,
            user=request.auth,  # type: ignore[attr-defined]
            git_ref=payload.git_ref,
            parallel=payload.parallel,
            limit=payload.limit,
            case_filter=payload.case_filter,
        )
    except ConfigError as exc:
        problems = [
            {"loc": ["agent.yaml", *([p.field_path] if p.field_path else [])], "msg": str(p)}
            for p in exc.problems
        ]
        return 422, {"detail": problems}
    except LaunchError as exc:
        return 422, {"detail": [{"loc": ["body", exc.field or "project"], "msg": str(exc)}]}
    return 201, run


@router.get("/runs/{run_id}", response=responses({200: RunDetailOut}, 404))
def run_detail(request: HttpRequest, run_id: Id) -> object:
    run = selectors.run_row(run_id=run_id, defer=("raw_yaml",))
    counts = selectors.run_case_counts(run=run)
    summary = run.summary or {}
    extra = {
        "not_graded_cases": counts.not_graded,
        "cancelled_cases": counts.cancelled,
        "parallel": run.options.get("parallel"),
        "limit": run.options.get("limit"),
        "case_filter": run.options.get("case_filter") or "",
        "metrics_evaluated": summary.get("metrics_evaluated", {}),
        "average_scores": summary.get("average_scores", {}),
        "metric_summary": run.metric_summary or [],
    }
    for name, value in extra.items():
        setattr(run, name, value)
    return run


@router.get("/runs/{run_id}/progress", response=responses({200: ProgressOut}, 404))
def run_progress(request: HttpRequest, run_id: Id) -> object:
    run = selectors.run_progress_get(run_id=run_id)
    return {**{f: getattr(run, f) for f in selectors.RUN_PROGRESS_FIELDS},
            "active": run.is_active, "percent": run.progress_percent}  # fmt: skip


@router.post("/runs/{run_id}/cancel", response=responses({200: RunOut}, 403, 404, 409))
def run_cancel(request: HttpRequest, run_id: Id) -> object:
    staff_only(request, "cancel runs")
    from runs.services.launch import run_cancel as cancel

    run = selectors.run_row(run_id=run_id)
    if not cancel(run=run):
        raise HttpError(409, f"run {run.pk} has already ended ({run.status})")
    run.refresh_from_db()
    return run


# --- cases and turns ----------------------------------------------------------------------------


class CaseOut(Schema):
    id: int
    index: int
    name: str
    status: str
    outcome: str
    passed: bool | None
    is_multi_turn: bool
    turn_count: int
    turns_passed: int
    execution_time_ms: int
    kind_outcomes: dict[str, str]


class CaseFilters(Schema):
    failed: bool = Field(default=False, description="only failed cases")
    q: SafeText = Field(default="", description="names containing this (case-insensitive)")


@router.get("/runs/{run_id}/cases", response=responses({200: list[CaseOut]}, 404))
@paginate(LimitOffsetPagination)
def case_list(request: HttpRequest, run_id: Id, filters: Query[CaseFilters]) -> object:
    run = selectors.run_row(run_id=run_id, only=("id",))
    return selectors.case_rows(
        run=run, only_failures=filters.failed, query=filters.q, fields=tuple(CaseOut.model_fields)
    )


class MetricOut(Schema):
    metric_name: str
    kind: str
    outcome: str
    score: float | None
    threshold: float | None
    passed: bool
    error: str | None
    reasoning: str | None
    model_used: str | None
    evaluation_time_ms: int | None
    judge_usage: dict[str, int] | None
    judge_cost_usd: float | None


class TurnOut(Schema):
    index: int
    input: str
    response: str | None
    ground_truth: str | None
    outcome: str
    passed: bool
    skipped: bool
    errors: list[str]
    expected_tools: list[Any] | None
    tool_calls: list[str]
    tool_invocations: list[dict[str, Any]]
    tools_matched: bool | None
    arg_match_details: list[dict[str, Any]] | None
    grader_details: dict[str, Any] | None
    kind_outcomes: dict[str, str]
    execution_time_ms: int
    token_usage: dict[str, int] | None
    metrics: list[MetricOut]

    @staticmethod
    def resolve_metrics(turn: Any) -> list[Any]:
        return list(turn.metrics.all())


@router.get("/runs/{run_id}/cases/{case_id}/turns", response=responses({200: list[TurnOut]}, 404))
def case_turns(request: HttpRequest, run_id: Id, case_id: Id) -> object:
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    return list(case.turns.all())


# --- export ------------------------------------------------------------------------------------


@router.get(
    "/runs/{run_id}/export",
    response=responses({200: None}, 404),
    summary="The run as a HoloDeck EvalRun (json), Markdown or JUnit XML",
)
def run_export(
    request: HttpRequest, run_id: Id, format: Literal["json", "markdown", "junit"] = "json"
) -> HttpResponse:
    return run_export_response(run_id=run_id, fmt=format)

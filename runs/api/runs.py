"""Runs: launch, list, detail, progress, cancel; a run's cases; a case's turns; export."""

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Header, Query, Router, Schema
from ninja.errors import HttpError
from ninja.pagination import paginate

from runs import selectors
from runs.api.auth import role_only
from runs.api.schemas import BoundedPagination, Id, SafeText, config_problems, responses
from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.limits import MAX_REPEATS
from runs.core.reviewing.vocabulary import Role
from runs.core.verdicts.outcomes import CaseOutcome, RunStatus
from runs.core.verdicts.summary import OutcomeCounts, RunSummary
from runs.core.wire.models import TurnResult
from runs.selectors.export import case_turn_results
from runs.selectors.runs import run_summary
from runs.selectors.transcripts import case_transcript_get
from runs.services.launch import LaunchError, run_create
from runs.services.launch import run_cancel as cancel
from runs.services.retention import run_keep_set
from runs.shared.downloads import run_export_response

if TYPE_CHECKING:
    from runs.models import Run

router = Router(tags=["runs"])


class RunCounters(Schema):
    """A run's live counters, as the run and its progress give them: one column per case
    verdict (``failed_cases`` counts failed cases only, never errored ones), and ``cases``, the
    same counts as one object whose fields add up to its ``total``."""

    total_cases: int
    cases_done: int
    total_turns: int
    turns_done: int
    passed_cases: int
    failed_cases: int
    errored_cases: int
    not_graded_cases: int
    cancelled_cases: int
    pass_rate: float | None
    cases: OutcomeCounts = Field(
        description="its cases by outcome (passed, failed, error, not_graded, skipped, "
        "cancelled, pending; they add up to total): the run page's Cases tile"
    )

    @staticmethod
    def resolve_cases(run: Any) -> OutcomeCounts:
        return run["cases"] if isinstance(run, dict) else run.counts


class RunOut(RunCounters):
    """A run's facts and live counters (``pass_rate`` is passed over graded cases — passed,
    failed and errored —, null while none is graded)."""

    id: int
    project_id: int | None
    agent_name: str
    status: str
    source: str
    git_ref: str
    git_commit: str
    git_branch: str
    git_dirty: bool
    git_subject: str = Field(
        description="the subject (first line of the message) of git_commit; empty when unknown "
        "(a HoloDeck result file has none)"
    )
    prompt_version: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    total_tokens: int
    regrade_of_id: int | None = Field(
        description="a re-grade: the run whose transcripts it graded again"
    )
    regrade_sources: dict[str, Any] = Field(
        description=(
            "a re-grade's two sources: `transcripts` (run, commit, snapshot) and `grading` "
            "(ref, commit, agent.yaml, snapshot); {} for other runs"
        )
    )
    rerun_of: int | None = Field(
        description="a re-run: the run some of whose cases (its failed ones, or one) it ran "
        "again, at that run's snapshot (`POST /runs/{id}/rerun`)"
    )
    keep: bool = Field(description="kept: `manage.py prune_runs` never deletes it")
    url: str

    @staticmethod
    def resolve_rerun_of(run: "Run") -> int | None:
        return run.rerun_of_id

    @staticmethod
    def resolve_url(run: "Run") -> str:
        return run.get_absolute_url()


class RunDetailOut(RunOut):
    """A run with its launch options and its summary: outcome counts of its cases and turns,
    and per metric the turns it graded (the numbers every page and export shows)."""

    error: str
    parallel: int | None
    limit: int | None
    case_filter: str
    repeats: int = Field(description="how many times each case ran (execution.repeats; 1: once)")
    summary: RunSummary
    status_reason: str = Field(
        description="why it has its status, in words (the run page's header): 'failed: 4 "
        "cases could not be graded (judge returned invalid JSON); none failed'"
    )

    @staticmethod
    def resolve_status_reason(run: "Run") -> str:
        return selectors.run_status_reason_get(run=run, summary=_summary(run)).sentence

    @staticmethod
    def resolve_parallel(run: "Run") -> int | None:
        return run.run_options.parallel

    @staticmethod
    def resolve_repeats(run: "Run") -> int:
        return run.repeats

    @staticmethod
    def resolve_limit(run: "Run") -> int | None:
        return run.case_limit

    @staticmethod
    def resolve_case_filter(run: "Run") -> str:
        return run.case_filter

    @staticmethod
    def resolve_summary(run: "Run") -> RunSummary:
        return _summary(run)


def _summary(run: "Run") -> RunSummary:
    """The run's summary, read once per response (its reason and its summary both need it)."""
    found: RunSummary | None = getattr(run, "_api_summary", None)
    if found is None:
        found = run._api_summary = run_summary(run=run)  # type: ignore[attr-defined]
    return found


REPEATS_HELP = (
    "each case runs this many times as independent sessions (default: the agent.yaml's "
    "execution.repeats)"
)


class RunLaunchIn(Schema):
    """The launch form's options."""

    project: Id
    git_ref: SafeText = ""
    parallel: int | None = Field(default=None, ge=1, le=64)
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    case_filter: SafeText = ""
    repeats: int | None = Field(None, ge=1, le=MAX_REPEATS, description=REPEATS_HELP)


class ProgressOut(RunCounters):
    id: int
    status: str
    active: bool
    percent: int


class RunFilters(Schema):
    project: Id | None = None
    status: RunStatus | None = None
    branch: SafeText | None = None
    commit: SafeText | None = Field(default=None, description="a commit prefix")


@router.get("/runs", response=responses({200: list[RunOut]}))
@paginate(BoundedPagination)
def run_list(request: HttpRequest, filters: Query[RunFilters]) -> object:
    return selectors.run_list(
        filters=selectors.RunListFilters(
            project_id=filters.project,
            status=filters.status or "",
            commit=filters.commit or "",
            branch=filters.branch or "",
        )
    )


IDEMPOTENCY_KEY = Header(
    "",
    alias="Idempotency-Key",
    max_length=100,
    description="Any token of yours (a uuid4): a repeat of the same request from the same user "
    "answers 200 with the run the first request created, instead of launching a second; the "
    "key sent with another request (another project or run, endpoint or options) is a 422 "
    "(docs/api.md).",
)


@router.post("/runs", response=responses({200: RunOut, 201: RunOut}, 403, 404, 422))
def run_launch(
    request: HttpRequest, payload: RunLaunchIn, idempotency_key: str = IDEMPOTENCY_KEY
) -> object:

    project = selectors.project_get(project_id=payload.project)
    role_only(request, project_id=project.pk, needed=Role.RUNNER, action="launch runs")
    key, user = idempotency_key.strip(), request.auth  # type: ignore[attr-defined]
    try:
        # The payload's launch options, as the launch form gives them.
        launch = payload.model_dump(exclude={"project"})
        run = run_create(project=project, user=user, idempotency_key=key, **launch)
    except ConfigError as exc:
        return 422, config_problems(exc)
    except LaunchError as exc:
        where = ["header", "Idempotency-Key"] if exc.field == "idempotency_key" else None
        loc = where or ["body", exc.field or "project"]
        return 422, {"detail": [{"loc": loc, "msg": str(exc)}]}
    return (200 if run.replayed else 201), run


@router.get("/runs/{run_id}", response=responses({200: RunDetailOut}, 404))
def run_detail(request: HttpRequest, run_id: Id) -> object:
    return selectors.run_row(run_id=run_id, defer=("raw_yaml",))


@router.get("/runs/{run_id}/progress", response=responses({200: ProgressOut}, 404))
def run_progress(request: HttpRequest, run_id: Id) -> object:
    run = selectors.run_progress_get(run_id=run_id)
    return {**{f: getattr(run, f) for f in selectors.RUN_PROGRESS_FIELDS}, "cases": run.counts,
            "active": run.is_active, "percent": run.progress_percent}  # fmt: skip


@router.post("/runs/{run_id}/cancel", response=responses({200: RunOut}, 403, 404, 409))
def run_cancel(request: HttpRequest, run_id: Id) -> object:

    run = selectors.run_row(run_id=run_id)
    role_only(request, project_id=run.project_id, needed=Role.RUNNER, action="cancel runs")
    if not cancel(run=run):
        raise HttpError(409, f"run {run.pk} has already ended ({run.status})")
    run.refresh_from_db()
    return run


class RunKeepIn(Schema):
    # Strict: JSON true/false only, as documented (0 or "yes" is a 422, not a guess).
    keep: bool = Field(
        strict=True, description="true: retention never deletes the run; false: it may again"
    )


@router.post("/runs/{run_id}/keep", response=responses({200: RunOut}, 403, 404, 422))
def run_keep(request: HttpRequest, run_id: Id, payload: RunKeepIn) -> object:
    """Keep a run from retention (`manage.py prune_runs`, HOLODECK_RETENTION_DAYS), or stop
    keeping it. The runner role in its project (or staff)."""

    run = selectors.run_row(run_id=run_id)
    role_only(request, project_id=run.project_id, needed=Role.RUNNER, action="keep runs")
    return run_keep_set(run=run, keep=payload.keep)


# --- cases and turns ----------------------------------------------------------------------------


class CaseOut(Schema):
    """A case row: its facts (id, index, name, status, turns) beside its result's fields,
    named as in the result (``TestResult``). ``outcome`` is null while it has no verdict."""

    id: int
    index: int
    repetition: int = Field(description="which run of the case, from 0 (execution.repeats)")
    name: str
    status: str
    is_multi_turn: bool
    turn_count: int
    turns_passed: int
    outcome: CaseOutcome | None
    kind_outcomes: dict[str, str]
    passed: bool | None
    tools_matched: bool | None
    execution_time_ms: int
    errors: list[str]

    @staticmethod
    def resolve_outcome(case: Any) -> str | None:
        return case.outcome or None


class CaseFiltersIn(Schema):
    failed: bool = Field(default=False, description="only cases that failed or errored")
    q: SafeText = Field(default="", description="names containing this (case-insensitive)")
    flaky: bool = Field(
        default=False,
        description="only the repetitions of cases that passed in some and failed in others",
    )
    outcome: CaseOutcome | None = Field(
        default=None,
        description="only cases with this verdict (`not_graded`: could not be graded; "
        "`error`: no answer to grade)",
    )
    metric: SafeText = Field(
        default="",
        description="only cases with a turn that failed this metric (by name; not those where "
        "it could not grade)",
    )
    tools: Literal["failed"] | None = Field(
        default=None,
        description="`failed`: only cases with a turn whose tool assertions failed (a tool not "
        "called, or called with other arguments)",
    )
    text: SafeText = Field(
        default="",
        description="only cases whose response (a turn's, or the case's) contains this "
        "(case-insensitive)",
    )


@router.get("/runs/{run_id}/cases", response=responses({200: list[CaseOut]}, 404))
@paginate(BoundedPagination)
def case_list(request: HttpRequest, run_id: Id, filters: Query[CaseFiltersIn]) -> object:
    run = selectors.run_row(run_id=run_id, only=("id",))
    return selectors.case_rows(
        run=run,
        filters=selectors.CaseFilters(
            failures=filters.failed,
            query=filters.q,
            flaky=filters.flaky,
            outcome=filters.outcome or "",
            metric=filters.metric,
            tools=filters.tools or "",
            text=filters.text,
        ),
        fields=tuple(CaseOut.model_fields),
    )


@router.get(
    "/runs/{run_id}/cases/{case_id}/turns",
    response=responses({200: list[TurnResult]}, 404),
    summary="A case's turns, as in a result file (TurnResult) with their verdicts",
)
def case_turns(request: HttpRequest, run_id: Id, case_id: Id) -> object:
    return case_turn_results(run_id=run_id, case_id=case_id)


class TranscriptTurnOut(Schema):
    turn_id: int
    turn_index: int
    outcome: str
    size_bytes: int = Field(description="bytes of the stored events (JSON)")
    events: list[dict[str, Any]] | None = Field(
        description="system, user, model_call (with cost_usd), assistant, tool_call, retry, "
        "error and truncated events, in order (docs/result-files.md); null: no transcript"
    )


class TranscriptOut(Schema):
    run_id: int
    case_id: int
    case_index: int
    case_name: str
    repetition: int
    turns: list[TranscriptTurnOut]


@router.get(
    "/runs/{run_id}/cases/{case_id}/transcript",
    response=responses({200: TranscriptOut}, 404),
    summary="What the agent was sent and did in each turn of a case",
)
def case_transcript(
    request: HttpRequest,
    run_id: Id,
    case_id: Id,
    requests: Literal["refs", "full"] = "refs",
) -> object:
    """`?requests=full`: each model call's `request` is the whole body it sent, `{format,
    body}`; `refs` (the default): as stored, earlier messages by reference
    (docs/result-files.md)."""
    found = case_transcript_get(run_id=run_id, case_id=case_id, full_requests=requests == "full")
    case = found.case
    return {
        "run_id": case.run_id,
        "case_id": case.pk,
        "case_index": case.index,
        "case_name": case.name,
        "repetition": case.repetition,
        "turns": [vars(turn) for turn in found.turns],
    }


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

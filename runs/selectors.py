"""Reads for the dashboard pages.

Every function here returns what one screen needs in a fixed number of queries, whatever the
size of the run: lists read the summary columns, turn details are fetched only for one case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from django.db.models import (
    Avg,
    BooleanField,
    Count,
    F,
    Func,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.fields.json import KT
from django.shortcuts import get_object_or_404

from runs.mapping import case_to_wire
from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult
from runs.report import models as wire
from runs.report.models import MetricKind

METRIC_KINDS: tuple[str, ...] = get_args(MetricKind)

# Columns a case row shows; the heavy JSON/text columns stay in the database until expanded.
CASE_ROW_FIELDS = (
    "id",
    "run_id",
    "index",
    "name",
    "status",
    "is_multi_turn",
    "turn_count",
    "turns_passed",
    "passed",
    "execution_time_ms",
    "finished_at",
    "outcome",
)

# Large run columns the case pages (case_detail.html and the case turns fragment) never read.
CASE_PAGE_UNUSED_RUN_FIELDS = (
    "raw_yaml",
    "config_snapshot",
    "environment",
    "cli_args",
    "options",
    "prompt_version",
    "summary",
    "metric_summary",
    "error",
)


@dataclass(frozen=True)
class MetricAverage:
    name: str
    kind: str
    average: float | None
    evaluated: int
    passed: int
    errored: int


def project_list() -> QuerySet[AgentProject]:
    """Projects with their last run's id, status, pass rate and time, in one query."""
    last_runs = Run.objects.filter(project=OuterRef("pk")).order_by("-created_at", "-id")
    return AgentProject.objects.annotate(
        last_run_id=Subquery(last_runs.values("id")[:1]),
        last_run_status=Subquery(last_runs.values("status")[:1]),
        last_run_passed=Subquery(last_runs.values("passed_cases")[:1]),
        last_run_total=Subquery(last_runs.values("total_cases")[:1]),
        last_run_commit=Subquery(last_runs.values("git_commit")[:1]),
        last_run_created_at=Subquery(last_runs.values("created_at")[:1]),
    ).order_by("name")


@dataclass(frozen=True)
class CaseCounts:
    """Run-wide counts the tiles show beside the stored passed/failed counters."""

    not_graded: int
    cancelled: int


# --- outcomes ------------------------------------------------------------------------------
# Verdicts are stored when a result is written (runs.report.outcomes); these only name them
# the way the pages do ("not-graded" as a CSS-friendly word, "none" for no verdict yet).


def case_outcome(case: CaseResult) -> str:
    """passed | failed | not-graded | cancelled | none (pending, running: no verdict yet)."""
    if case.status == CaseResult.Status.ERROR:
        return "failed"
    return _shown(case.outcome) if case.outcome else "none"


def turn_outcome(turn: TurnResult) -> str:
    """passed | failed | not-graded | skipped (an errored turn shows as failed)."""
    return "failed" if turn.outcome == "error" else _shown(turn.outcome)


def _shown(outcome: str) -> str:
    return "not-graded" if outcome == "not_graded" else outcome


def run_case_counts(*, run: Run) -> CaseCounts:
    """Not-graded and cancelled cases of the whole run, in one query."""
    counts = CaseResult.objects.filter(run=run).aggregate(
        not_graded=Count("id", filter=Q(outcome="not_graded")),
        cancelled=Count("id", filter=Q(outcome="cancelled")),
    )
    return CaseCounts(not_graded=counts["not_graded"], cancelled=counts["cancelled"])


# --- lists ---------------------------------------------------------------------------------


def agent_names() -> list[str]:
    """Distinct agent names of all runs (imported runs have no project, only a name)."""
    names = Run.objects.order_by("agent_name").values_list("agent_name", flat=True).distinct()
    return [name for name in names if name]


# Where the list filters look inside a run's JSON columns (key transforms work on both SQLite and
# PostgreSQL; the tags list needs JSONListHas below).
PROMPT_VERSION = "prompt_version__version"
MODEL_NAME = "config_snapshot__model__name"
PROMPT_TAGS = "prompt_version__tags"


@dataclass(frozen=True)
class RunListFilters:
    """The runs list's filters; the empty value of each means "any"."""

    project_id: int | None = None
    status: str = ""
    commit: str = ""
    agent: str = ""
    since: datetime | None = None  # created at or after
    before: datetime | None = None  # created strictly before
    version: str = ""
    model: str = ""
    tag: str = ""
    min_pass: float | None = None
    q: str = ""


@dataclass(frozen=True)
class RunFacets:
    """The prompt versions, model names and tags present in the runs (the list's selects)."""

    versions: list[str]
    models: list[str]
    tags: list[str]


class JSONListHas(Func):
    """True when the JSON list at ``column -> key`` has a string element equal to ``value``
    (``icontains``: one containing it, case-insensitively).

    Django's ``__contains`` on a JSON field is PostgreSQL-only, and matching the list's JSON text
    finds parts of other tags and misses escaped characters; this looks at the decoded elements
    in SQL on both databases, so the filter stays in the query and the pagination stays right.
    (SQLite and PostgreSQL are the two databases HoloDeck Web runs on; there is no generic SQL.)
    """

    output_field = BooleanField()

    def __init__(self, column: str, key: str, value: str, *, icontains: bool = False) -> None:
        self.icontains = icontains
        super().__init__(F(column), Value(key), Value(value))

    def _parts(self, compiler: Any, connection: Any) -> tuple[str, list[Any], str, str]:
        """The column's SQL and params, the key, and the value (a LIKE pattern for icontains)."""
        column, key, value = self.get_source_expressions()
        column_sql, column_params = compiler.compile(column)
        wanted = value.value  # type: ignore[attr-defined]
        if self.icontains:
            wanted = f"%{connection.ops.prep_for_like_query(wanted)}%"
        return column_sql, list(column_params), key.value, wanted  # type: ignore[attr-defined]

    def as_sqlite(
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        column_sql, params, key, wanted = self._parts(compiler, connection)
        match = "item.value LIKE %s ESCAPE '\\'" if self.icontains else "item.value = %s"
        path = f'$."{key}"'
        # json_each walks a lone string too: only a list has elements.
        sql = (
            f"(json_type({column_sql}, %s) = 'array' AND EXISTS (SELECT 1 FROM"
            f" json_each({column_sql}, %s) AS item WHERE item.type = 'text' AND {match}))"
        )
        return sql, (*params, path, *params, path, wanted)

    def as_postgresql(
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        column_sql, params, key, wanted = self._parts(compiler, connection)
        match = "UPPER(item) LIKE UPPER(%s)" if self.icontains else "item = %s"
        # jsonb_array_elements_text fails on anything but a list: such a row has no elements.
        sql = (
            f"EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN"
            f" jsonb_typeof({column_sql} -> %s) = 'array' THEN {column_sql} -> %s END) AS item"
            f" WHERE {match})"
        )
        return sql, (*params, key, *params, key, wanted)


def run_list(*, filters: RunListFilters | None = None) -> QuerySet[Run]:
    """Runs matching ``filters``, newest first, with ``model_name`` and ``version_label``."""
    f = filters or RunListFilters()
    runs = (
        Run.objects.select_related("project")
        .defer(
            "raw_yaml", "config_snapshot", "environment", "summary", "metric_summary", "cli_args"
        )
        .annotate(model_name=KT(MODEL_NAME), version_label=KT(PROMPT_VERSION))
    )
    if f.project_id is not None:
        runs = runs.filter(project_id=f.project_id)
    if f.status:
        runs = runs.filter(status=f.status)
    if f.commit:
        runs = runs.filter(git_commit__startswith=f.commit.lower())
    if f.agent:
        runs = runs.filter(agent_name=f.agent)
    if f.since is not None:
        runs = runs.filter(created_at__gte=f.since)
    if f.before is not None:
        runs = runs.filter(created_at__lt=f.before)
    if f.version:
        runs = runs.filter(**{PROMPT_VERSION: f.version})
    if f.model:
        runs = runs.filter(**{MODEL_NAME: f.model})
    if f.tag:
        runs = runs.filter(JSONListHas("prompt_version", "tags", f.tag))
    if f.min_pass is not None:
        runs = runs.filter(pass_rate__gte=f.min_pass)
    if f.q:
        runs = runs.filter(_text_match(f.q))
    return runs.order_by("-created_at", "-id")


def _text_match(text: str) -> Q:
    """Runs whose prompt version, model, commit (prefix), branch, agent or a tag has ``text``."""
    return (
        Q(**{f"{PROMPT_VERSION}__icontains": text})
        | Q(**{f"{MODEL_NAME}__icontains": text})
        | Q(git_commit__startswith=text.lower())
        | Q(git_branch__icontains=text)
        | Q(agent_name__icontains=text)
        | Q(JSONListHas("prompt_version", "tags", text, icontains=True))
    )


def run_facets() -> RunFacets:
    """Every prompt version, model name and tag list present, in one query (a UNION of three
    DISTINCT reads of the JSON columns), whatever the number of runs."""

    def texts(kind: str, path: str) -> QuerySet[Run, tuple[str, str]]:
        return (
            Run.objects.order_by()
            .annotate(kind=Value(kind), text=KT(path))
            .filter(text__isnull=False)
            .exclude(**{path: None})  # a JSON null (SQLite's text of it is "null")
            .values_list("kind", "text")
            .distinct()
        )

    # A UNION takes the model's default ordering back, which it cannot apply: order by nothing.
    rows = (
        texts("version", PROMPT_VERSION)
        .union(texts("model", MODEL_NAME), texts("tags", PROMPT_TAGS))
        .order_by()
    )
    found: dict[str, set[str]] = {"version": set(), "model": set(), "tags": set()}
    for kind, text in rows:
        if kind == "tags":
            found["tags"].update(_tag_list(text))
        elif text:
            found[kind].add(str(text))
    return RunFacets(*(sorted(found[kind]) for kind in ("version", "model", "tags")))


def _tag_list(text: str) -> list[str]:
    """The string elements of a tags list read as JSON text (anything else is no tag)."""
    try:
        tags = json.loads(text)
    except (TypeError, ValueError):
        return []
    return [tag for tag in tags if isinstance(tag, str) and tag] if isinstance(tags, list) else []


def run_get(*, run_id: int) -> Run:
    return get_object_or_404(
        Run.objects.select_related("project", "created_by").defer("raw_yaml", "config_snapshot"),
        pk=run_id,
    )


def run_metric_averages(*, run: Run) -> dict[str, list[MetricAverage]]:
    """Per-metric averages grouped by kind (one aggregate query over the metric rows).

    Computed from the rows rather than ``Run.metric_summary`` so a running run shows the
    averages of the turns finished so far.
    """
    rows = (
        MetricResult.objects.filter(run=run)
        .values("kind", "metric_name")
        .annotate(
            average=Avg("score"),
            evaluated=Count("id"),
            passed_count=Count("id", filter=Q(passed=True)),
            errored=Count("id", filter=Q(error__isnull=False) & ~Q(error="")),
        )
        .order_by("kind", "metric_name")
    )
    grouped: dict[str, list[MetricAverage]] = {}
    for row in rows:
        grouped.setdefault(row["kind"], []).append(
            MetricAverage(
                name=row["metric_name"],
                kind=row["kind"],
                average=row["average"],
                evaluated=row["evaluated"],
                passed=row["passed_count"],
                errored=row["errored"],
            )
        )
    ordered = sorted(grouped, key=lambda k: METRIC_KINDS.index(k) if k in METRIC_KINDS else 99)
    return {kind: grouped[kind] for kind in ordered}


def case_rows(*, run: Run, only_failures: bool = False, query: str = "") -> QuerySet[CaseResult]:
    """The case rows of a run; ``query`` keeps names containing it (case-insensitive)."""
    cases = CaseResult.objects.filter(run=run).only(*CASE_ROW_FIELDS).order_by("index")
    if only_failures:
        cases = cases.filter(passed=False)
    if query:
        cases = cases.filter(name__icontains=query)
    return cases


def case_rows_finished_since(
    *, run: Run, since: datetime, only_failures: bool = False, query: str = ""
) -> list[CaseResult]:
    """Case rows that finished after ``since`` (the progress poll swaps just these)."""
    rows = case_rows(run=run, only_failures=only_failures, query=query)
    return list(rows.filter(finished_at__gt=since))


def next_failed_case(*, case: CaseResult) -> CaseResult | None:
    """The next failed case of the same run after ``case`` (by index), if any."""
    return (
        CaseResult.objects.filter(run_id=case.run_id, passed=False, index__gt=case.index)
        .only("id", "run_id", "index", "name")
        .order_by("index")
        .first()
    )


def case_get(*, run_id: int, case_id: int) -> CaseResult:
    """One case with its run, turns and each turn's metrics (three queries).

    The case pages read only the run's id, agent name and status, so the run's project is not
    joined and its large text/JSON columns stay in the database.
    """
    turns = TurnResult.objects.order_by("index").prefetch_related(
        Prefetch("metrics", queryset=MetricResult.objects.order_by("position", "id"))
    )
    return get_object_or_404(
        CaseResult.objects.select_related("run")
        .defer(*(f"run__{name}" for name in CASE_PAGE_UNUSED_RUN_FIELDS))
        .prefetch_related(Prefetch("turns", queryset=turns)),
        pk=case_id,
        run_id=run_id,
    )


# --- export ----------------------------------------------------------------------------------


def run_eval_run(*, run: Run) -> wire.EvalRun:
    """The run as a HoloDeck-compatible EvalRun (``{report, metadata}``), rebuilt from its rows.

    Three queries whatever the run's size: cases, turns, metrics. An imported run keeps the
    summary it was imported with; others are summarised from their cases.
    """
    from runs.report.build import summarize

    cases = list(
        CaseResult.objects.filter(
            run=run, status__in=[CaseResult.Status.DONE, CaseResult.Status.ERROR]
        ).order_by("index")
    )
    turns_by_case: dict[int, list[TurnResult]] = {}
    metrics_by_turn: dict[int, list[MetricResult]] = {}
    for metric in MetricResult.objects.filter(run=run).order_by("turn_id", "position"):
        metrics_by_turn.setdefault(metric.turn_id, []).append(metric)
    for turn in TurnResult.objects.filter(run=run).order_by("case_id", "index"):
        turns_by_case.setdefault(turn.case_id, []).append(turn)
    results = [
        case_to_wire(case, turns_by_case.get(case.pk, []), metrics_by_turn) for case in cases
    ]
    summary = summarize(results, run.duration_ms or 0)
    if run.source == Run.Source.IMPORT:
        summary = wire.ReportSummary(
            total_tests=run.total_cases,
            passed=run.passed_cases,
            failed=run.failed_cases,
            pass_rate=run.pass_rate or 0.0,
            total_duration_ms=run.duration_ms or 0,
            **run.summary,
        )
    report = wire.TestReport(
        agent_name=run.agent_name,
        agent_config_path=run.agent_config_path,
        results=results,
        summary=summary,
        timestamp=run.report_timestamp or run.created_at.isoformat(),
        holodeck_version=run.holodeck_version or "holodeck-web 0.1.0",
        environment=run.environment,
    )
    metadata = wire.EvalRunMetadata(
        agent_config=run.config_snapshot,
        prompt_version=run.prompt_version,
        holodeck_version=report.holodeck_version,
        cli_args=run.cli_args,
        git_commit=run.git_commit or None,
    )
    return wire.EvalRun(report=report, metadata=metadata)

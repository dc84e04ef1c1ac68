"""Reads of runs: the runs list (filters, facets), one run and its summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import BooleanField, F, Func, Q, QuerySet, Value
from django.db.models.fields.json import KT
from django.shortcuts import get_object_or_404

from runs.core.verdicts.outcomes import Outcome, RunState
from runs.core.verdicts.status import StatusReason, run_status_reason
from runs.core.verdicts.summary import RunSummary
from runs.mapping import counts_of_rows, summaries_of_rows, tool_counts_of_rows
from runs.models import Run
from runs.selectors.case_counts import case_cause

# The runs list's status filter: (value, label) of every status a run can have.
RUN_STATUSES: list[tuple[str, str]] = RunState.choices()


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
    branch: str = ""  # exactly this branch (the API's filter; the page has none)
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
        .defer("raw_yaml", "config_snapshot", "environment", "summary", "cli_args")
        .annotate(
            model_name=KT(MODEL_NAME),
            version_label=KT(PROMPT_VERSION),
        )
    )
    if f.project_id is not None:
        runs = runs.filter(project_id=f.project_id)
    if f.status:
        runs = runs.filter(status=f.status)
    if f.commit:
        runs = runs.filter(git_commit__startswith=f.commit.lower())
    if f.branch:
        runs = runs.filter(git_branch=f.branch)
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
    """One run for its page, with its project and who launched it, or 404."""
    return get_object_or_404(
        Run.objects.select_related("project", "created_by").defer("raw_yaml", "config_snapshot"),
        pk=run_id,
    )


def run_summary(*, run: Run) -> RunSummary:
    """The run's summary as every surface shows it (``run_summaries`` of one run)."""
    return run_summaries([run])[run.pk]


def run_summaries(runs: Sequence[Run]) -> dict[int, RunSummary]:
    """Each run's summary: the one stored when it ended; while it runs (or for a finished run
    stored without one, none should be) the live one from its rows — four queries for all
    such runs together, whatever their size; one more when a stored one predates the count of
    tool verdicts (``_with_tools``)."""
    summaries = {
        run.pk: _with_unrun_turns(run, stored)
        for run in runs
        if not run.is_live and (stored := RunSummary.stored(run.summary)) is not None
    }
    live = [run.pk for run in runs if run.pk not in summaries]
    return _with_tools(summaries) | (summaries_of_rows(live) if live else {})


def run_summary_now(*, run: Run, summary: RunSummary) -> RunSummary:
    """``summary`` (a live run's may be some seconds old: its metrics are costly to count)
    with the cases and turns of a live run counted now (three small queries): what the run
    page's tiles and progress box show, so that they add up and agree at every poll."""
    if not run.is_live:
        return summary
    cases, turns = counts_of_rows(run.pk)
    return summary.model_copy(update={"cases": cases, "turns": turns})


def _with_unrun_turns(run: Run, summary: RunSummary) -> RunSummary:
    """A summary stored before the turns not run were counted (its turns fewer than the
    run's planned ones), with them: cancelled in a cancelled run, else skipped."""
    missing = run.total_turns - summary.turns.total
    if missing <= 0 or summary.cases.total != run.total_cases:  # not this run's whole summary
        return summary
    field = (Outcome.CANCELLED if run.status == Run.Status.CANCELLED else Outcome.SKIPPED).value
    turns = summary.turns.model_copy(
        update={"total": run.total_turns, field: getattr(summary.turns, field) + missing}
    )
    return summary.model_copy(update={"turns": turns})


def _with_tools(summaries: dict[int, RunSummary]) -> dict[int, RunSummary]:
    """``summaries`` with the tool verdicts a summary stored before they were counted lacks,
    counted from the rows (one query for all such runs; none when every one has them)."""
    missing = [run_id for run_id, summary in summaries.items() if summary.tools is None]
    if not missing:
        return summaries
    counted = tool_counts_of_rows(missing)
    return summaries | {
        run_id: summaries[run_id].model_copy(update={"tools": counted[run_id]})
        for run_id in missing
    }


def run_status_reason_get(*, run: Run, summary: RunSummary) -> StatusReason:
    """Why ``run`` (with ``summary``, stored or live) has its status
    (``runs.core.verdicts.status``), naming the most common error of its not-graded and of its
    errored cases once it has ended (stored with it; else one bounded query each, only when it has
    such cases; none while it runs)."""
    counts = summary.cases
    ended = not run.is_live
    return run_status_reason(
        status=run.status,
        counts=counts,
        run_error=run.error,
        not_graded_cause=case_cause(run=run, outcome=Outcome.NOT_GRADED)
        if ended and counts.not_graded
        else "",
        error_cause=case_cause(run=run, outcome=Outcome.ERROR) if ended and counts.error else "",
    )


def run_row(*, run_id: int, only: Sequence[str] = (), defer: Sequence[str] = ()) -> Run:
    """One run, or 404: every column (what a service acting on the run may read), just
    ``only``'s, or all but ``defer``'s."""
    runs = Run.objects.all()
    if only:
        runs = runs.only(*only)
    if defer:
        runs = runs.defer(*defer)
    return get_object_or_404(runs, pk=run_id)


# What a run's progress says (the API's progress endpoint reads just these columns).
RUN_PROGRESS_FIELDS = (
    "id",
    "status",
    "total_cases",
    "cases_done",
    "total_turns",
    "turns_done",
    "passed_cases",
    "failed_cases",
    "errored_cases",
    "not_graded_cases",
    "cancelled_cases",
    "pass_rate",
)


def run_progress_get(*, run_id: int) -> Run:
    """One run with only its progress columns, or 404."""
    return run_row(run_id=run_id, only=RUN_PROGRESS_FIELDS)

"""Reads for the trends page: a project's (or an imported agent's) finished runs, their
metric averages and the turns each regressed and fixed against the run before, and the runs in
commit order.

Every number is the run's stored summary (``runs.core.verdicts.summary.RunSummary``, the one the run
page, compare, the API and the exports show): its pass rate, its case counts and its metrics'
average scores; a run with no pass rate (no case graded) stays off the pass-rate line.

Four queries whatever the number of runs: the runs (only the columns the chart shows, and the
case counts and pass rate of their summaries), their failing turns and how many people triaged
(one grouped count: the runs table's "reviewed" cell), the metric averages of the runs shown (their
summaries' metrics) and their turns' verdicts (one text per case, as compare reads them), for
the turns each run regressed and fixed against the run before it. Runs are put in commit order
with ``git rev-list --first-parent`` when the project's directory is a git repository, else in
date order. The chart itself is drawn from these by ``runs.core.charts.trend_chart``.

A re-grade comes with its sources (``Run.regrade``): the chart keeps it out of the commit
series and draws it beside the run whose transcripts it grades.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q
from django.db.models.fields.json import KT
from django.utils import timezone

from runs.core.charts.trend_chart import MetricKey, RunChurn, TrendRun
from runs.core.commit_order import commit_ordered
from runs.core.comparison.matrix import series_churn
from runs.core.gitutil import GitError, commit_order
from runs.core.verdicts.regrades import RegradeSources
from runs.core.verdicts.summary import MetricSummary, OutcomeCounts
from runs.models import AgentProject, Run, TurnRow
from runs.review_models import Review
from runs.selectors.compare_cases import case_turns
from runs.selectors.partial import PARTIAL_COLUMNS, partial_text_of
from runs.selectors.reviews import FAILURE_OUTCOMES

FINISHED = (Run.Status.PASSED, Run.Status.FAILED, Run.Status.ERROR)


def finished_runs(*, project: AgentProject | None, agent: str) -> list[TrendRun]:
    """The finished runs (passed, failed, error) of a project and/or agent, oldest first, with
    the pass rate and case counts of their stored summaries, and their failing turns and how
    many people triaged. One query reading only the columns shown (the model is read out of the
    config snapshot, the counts out of the summary), one counting the reviews."""
    runs = Run.objects.filter(status__in=FINISHED)
    if project is not None:
        runs = runs.filter(project=project)
    if agent:
        runs = runs.filter(agent_name=agent)
    rows = runs.order_by("created_at", "id").values_list(
        "id",
        "status",
        "agent_name",
        "git_commit",
        "git_branch",
        "git_dirty",
        "prompt_version",
        KT("config_snapshot__model__name"),
        KT("config_snapshot__model__provider"),
        "pass_rate",
        "created_at",
        "summary__cases",
        "regrade_of",
        "regrade_sources",
        "total_cases",
        *PARTIAL_COLUMNS,
        "git_subject",
    )
    trends = [_trend_run(row) for row in rows]
    reviewed = runs_reviewed(runs)
    for position, trend in enumerate(trends):
        failures, triaged = reviewed.get(trend.id, (0, 0))
        trends[position] = replace(trend, failures=failures, triaged=triaged)
    return trends


def runs_reviewed(runs: Any) -> dict[int, tuple[int, int]]:
    """Run id -> (its failing turns, of them triaged by its own reviews) for the runs (a
    queryset) with failing turns (one query)."""
    triaging = Review.objects.filter(turn=OuterRef("pk"), reopened=False).filter(
        ~Q(verdict="") | Q(category__isnull=False)
    )
    rows = (
        TurnRow.objects.filter(run__in=runs.values("pk"), outcome__in=FAILURE_OUTCOMES)
        .annotate(is_triaged=Exists(triaging))
        .order_by()
        .values("run_id")
        .annotate(failures=Count("id"), triaged=Count("id", filter=Q(is_triaged=True)))
        .values_list("run_id", "failures", "triaged")
    )
    return {run_id: (failures, triaged) for run_id, failures, triaged in rows}


def _trend_run(row: tuple[Any, ...]) -> TrendRun:
    # The summary's pass rate is its cases' (a run stored without a summary, none should be,
    # keeps its pass-rate column).
    cases = None if row[11] is None else OutcomeCounts.model_validate(row[11])
    sources = RegradeSources.stored(row[13])
    regrade: dict[str, Any] = {}
    if sources is not None:
        regrade = {
            "regrade_of": sources.of,
            "transcripts_run": sources.transcripts.run,
            "graded_with": sources.grading.label,
            "grading_commit": sources.grading.commit,
        }
    elif row[12] is not None:  # a re-grade recorded without its sources: beside its original
        regrade = {
            "regrade_of": row[12],
            "transcripts_run": row[12],
            "graded_with": "another agent.yaml",
        }
    return TrendRun(
        **regrade,
        id=row[0],
        status=row[1],
        agent_name=row[2],
        commit=row[3],
        branch=row[4],
        dirty=row[5],
        prompt_version=prompt_label(row[6]),
        model=row[7] or "",
        provider=row[8] or "",
        pass_rate=row[9] if cases is None else cases.pass_rate,
        # In the time zone the page shows: the chart's labels read it as it is.
        created_at=timezone.localtime(row[10]),
        cases=cases,
        partial=partial_text_of(row[15], row[16], row[17], row[14], row[18]),
        subject=row[19],
    )


def prompt_label(prompt_version: Any) -> str:
    """HoloDeck's ``{version, author, tags, ...}`` as its version; a bare value as text."""
    if isinstance(prompt_version, dict):
        version = prompt_version.get("version")
        return "" if version is None else str(version)
    if prompt_version is None:
        return ""
    return str(prompt_version)


def agents_without_project() -> list[str]:
    """The agents of finished runs that have no project (imported runs), by name."""
    agents = (
        Run.objects.filter(project__isnull=True, status__in=FINISHED)
        .order_by("agent_name")
        .values_list("agent_name", flat=True)
        .distinct()
    )
    return list(agents)


def branch_choices(runs: Iterable[TrendRun]) -> list[str]:
    return sorted({run.branch for run in runs if run.branch})


def metric_averages(
    *, run_ids: Sequence[int], kinds: Sequence[str]
) -> dict[MetricKey, dict[int, float]]:
    """{(kind, metric): {run id: average score}} of the metrics of ``kinds`` that scored, as the
    runs' stored summaries have them; one query."""
    if not run_ids or not kinds:
        return {}
    rows = Run.objects.filter(pk__in=run_ids).values_list("id", "summary__metrics").order_by()
    averages: dict[MetricKey, dict[int, float]] = {}
    for run_id, metrics in rows:
        for metric in (MetricSummary.model_validate(item) for item in metrics or ()):
            if metric.kind in kinds and metric.average is not None:
                averages.setdefault((metric.kind, metric.name), {})[run_id] = metric.average
    return averages


def run_churn(run_ids: Sequence[int], kinds: Sequence[str] = ()) -> dict[int, RunChurn]:
    """Per run of the series ``run_ids`` (oldest first) but the first: how many of its turns
    regressed and were fixed against the run before it (cases by name, turns by index, as
    compare aligns them); ``kinds``: only those kinds' verdicts count (empty: the stored ones,
    tool assertions included). One query: the turn verdicts of the runs, one text per case."""
    ids = list(run_ids)
    if len(ids) < 2:
        return {}
    cases = case_turns(ids)
    counts = series_churn([cases.get(run_id, []) for run_id in ids], kinds)
    return {
        run_id: RunChurn(previous, *count)
        for (previous, run_id), count in zip(pairwise(ids), counts[1:], strict=True)
        if count is not None
    }


# --- ordering --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ordering:
    runs: list[TrendRun]
    by_commit: bool
    note: str


def runs_ordered(runs: list[TrendRun], *, directory: str | None, branch: str) -> Ordering:
    """Commit order on ``branch``'s first-parent history (HEAD's when no branch is chosen) when
    ``directory`` is in a git repository; date order otherwise."""
    if not directory:
        return Ordering(runs, False, "in date order (runs without a project)")
    try:
        history = commit_order(Path(directory), branch)
    except GitError:
        return Ordering(runs, False, "in date order (the project is not in a git repository)")
    where = branch or "HEAD"
    return Ordering(commit_ordered(runs, history), True, f"in commit order of {where}")

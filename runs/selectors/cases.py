"""Reads of a run's cases: the case rows of the run page, one case with its turns and its
summary. Verdicts are the stored ``outcome`` of each row; pages draw them as they are."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Count, Prefetch, Q, QuerySet, Subquery
from django.http import Http404
from django.shortcuts import get_object_or_404

from runs.core.verdicts.kinds import METRIC_KINDS, TOOLS_KIND
from runs.core.verdicts.numbers import case_text
from runs.core.verdicts.outcomes import BAD, Outcome
from runs.core.verdicts.repeats import RepeatStats, ScoreSpread, score_spreads, stats_by_unit
from runs.core.verdicts.summary import RunSummary
from runs.mapping import summary_of_rows
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.selectors.text_search import cases_with_text

# "Only failures": cases that failed or errored (not those that could not be graded), in the
# order of the partial index that holds them (``case_run_failures``: SQLite uses it only for
# the very same list).
FAILURES = tuple(sorted(outcome.value for outcome in BAD))
# The outcomes a case list can be filtered to (``?outcome=``): a case's stored verdicts.
CASE_OUTCOMES = (
    Outcome.PASSED.value,
    Outcome.FAILED.value,
    Outcome.ERROR.value,
    Outcome.NOT_GRADED.value,
    Outcome.CANCELLED.value,
)


@dataclass(frozen=True)
class CaseFilters:
    """The filters of a run's case list (the run page's toolbar, the API's case list); the
    empty value of each means "any".

    ``failures``: failed or errored cases; ``outcome``: cases with that stored verdict;
    ``metric``: cases with a turn that failed that metric (by name; not those where it could
    not grade); ``query``: names containing it (case-insensitive); ``flaky``: the repetitions
    of cases that passed in some repetitions and failed in others; ``tools`` (``failed``):
    cases with a turn whose tool assertions failed — a tool not called, or called with other
    arguments (the case's ``kind_outcomes["tools"]``, its turns' verdicts rolled up: a case is
    listed once it has settled); ``text``: cases whose response (a turn's, or the case's)
    contains it (case-insensitive)."""

    failures: bool = False
    query: str = ""
    flaky: bool = False
    outcome: str = ""
    metric: str = ""
    tools: str = ""
    text: str = ""


# The tool verdicts a case list can be filtered to (``?tools=``).
TOOL_VERDICTS = (Outcome.FAILED.value,)
# A case with a failed tool assertion did not pass (a turn that failed one fails, and so does its
# case, or it was cancelled): the tools filter reads the verdicts of these only, found through
# the index on run and outcome.
UNPASSED = tuple(outcome for outcome in CASE_OUTCOMES if outcome != Outcome.PASSED)
# How many matching cases a text search lists by id (``_cases_with_text``).
TEXT_IDS = 5_000

# Columns a case row shows; the heavy JSON/text columns stay in the database until expanded
# (``kind_outcomes`` is a few words: its ``tools`` verdict marks a failed tool assertion).
CASE_ROW_FIELDS = (
    "id",
    "run_id",
    "index",
    "repetition",
    "name",
    "status",
    "is_multi_turn",
    "turn_count",
    "turns_passed",
    "passed",
    "execution_time_ms",
    "started_at",
    "finished_at",
    "outcome",
    "kind_outcomes",
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
    "error",
)


def case_rows(
    *,
    run: Run,
    filters: CaseFilters = CaseFilters(),
    fields: Sequence[str] = CASE_ROW_FIELDS,
) -> QuerySet[CaseRow]:
    """The case rows of a run that pass ``filters`` (reading ``fields``), in one query: the
    verdict filters read the indexed ``outcome`` column; the metric filter is a semi-join on
    the run's metric rows (``MetricRow``'s index on run and metric name); the tools filter
    reads the verdicts of the run's cases that did not pass. A text search first reads the ids
    of the cases that have the text (``_cases_with_text``: one scan of the run's responses)."""
    cases = CaseRow.objects.filter(run=run).only(*fields).order_by("index", "repetition")
    if filters.failures:
        cases = cases.filter(outcome__in=FAILURES)
    if filters.outcome:
        cases = cases.filter(outcome=filters.outcome)
    if filters.metric:
        cases = cases.filter(pk__in=Subquery(_cases_failing_metric(run, filters.metric)))
    if filters.tools:
        cases = cases.filter(outcome__in=UNPASSED).filter(
            **{f"kind_outcomes__{TOOLS_KIND}": filters.tools}
        )
    if filters.query:
        cases = cases.filter(name__icontains=filters.query)
    if filters.text:
        cases = cases.filter(_cases_with_text(run, filters.text))
    if filters.flaky:
        cases = cases.filter(index__in=Subquery(_flaky_indices(run)))
    return cases


def _cases_failing_metric(run: Run, metric: str) -> QuerySet[Any, Any]:
    """The ids of the run's cases with a turn that failed ``metric``, as a subquery. Every
    kind is named so the database seeks the failures in ``metric_summary_cover`` (run, name,
    kind, outcome) instead of reading every grade of the metric."""
    return (
        MetricRow.objects.filter(
            run=run, metric_name=metric, kind__in=METRIC_KINDS, outcome=Outcome.FAILED
        )
        .order_by()
        .values("turn__case_id")
    )


class MetricFailureList:
    """The case list filtered to one metric's failures (``?metric=`` alone), paged through the
    index ``metric_failures_by_case``: a page reads the index's next case indices in case
    order, then their rows (a repeated run's list: the indices). What a ``Paginator`` pages:
    ``count()`` and slices; two small queries a page, whatever the run's size."""

    def __init__(self, *, run: Run, metric: str, fields: Sequence[str] = CASE_ROW_FIELDS):
        self.run = run
        self.rows = case_rows(run=run, fields=fields)
        self.keys = (
            MetricRow.objects.filter(run=run, metric_name=metric, outcome=Outcome.FAILED)
            .order_by("case_index")
            .values_list("case_index", flat=True)
            .distinct()
        )

    def count(self) -> int:
        return int(self.keys.count())

    def after(self, index: int) -> MetricFailureList:
        """The list of the failures after the case at ``index`` (a "load more": keyset)."""
        following = copy.copy(self)
        following.keys = self.keys.filter(case_index__gt=index)
        return following

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, page: slice) -> list[Any]:
        indices = [index for index in self.keys[page] if index is not None]
        if self.run.repeats > 1:
            return indices
        return list(self.rows.filter(index__in=indices))


def _cases_with_text(run: Run, text: str) -> Q:
    """The run's cases whose response contains ``text``, case-insensitively as the database
    folds it (SQLite: ASCII letters only): a turn's response, or the case's own
    ``agent_response``, found through the text index (``runs.selectors.text_search``); up to
    ``TEXT_IDS`` of them by id, more matched by the list's own queries."""
    return cases_with_text(run=run, text=text, limit=TEXT_IDS)


def _flaky_indices(run: Run) -> QuerySet[Any, Any]:
    """The indices of the run's flaky cases (``runs.core.verdicts.repeats``), as a subquery."""
    return (
        CaseRow.objects.filter(run=run)
        .order_by()
        .values("index")
        .annotate(
            passed=Count("pk", filter=Q(outcome=Outcome.PASSED)),
            failed=Count("pk", filter=Q(outcome__in=FAILURES)),
        )
        .filter(passed__gt=0, failed__gt=0)
        .values("index")
    )


def case_repeat_stats(*, run: Run) -> dict[int, RepeatStats]:
    """Each case's repetitions together (by case index), for a repeated run; {} for a run that
    ran each case once. One query."""
    if run.repeats == 1:
        return {}
    # Counted by the database (one row per case, not per repetition), as ``repeat_stats``
    # counts: passed, and failed or errored.
    rows = (
        CaseRow.objects.filter(run=run)
        .order_by()
        .values("index")
        .annotate(
            repetitions=Count("pk"),
            passed=Count("pk", filter=Q(outcome=Outcome.PASSED)),
            failed=Count("pk", filter=Q(outcome__in=FAILURES)),
        )
        .values_list("index", "repetitions", "passed", "failed")
    )
    return {index: RepeatStats(*counts) for index, *counts in rows}


def case_repetitions(*, case: CaseRow) -> list[CaseRow]:
    """Every repetition of ``case``'s case in its run (itself included), in order."""
    return list(
        CaseRow.objects.filter(run_id=case.run_id, index=case.index)
        .only("id", "run_id", "index", "repetition", "outcome", "status")
        .order_by("repetition")
    )


def turn_repeat_stats(*, case: CaseRow) -> dict[int, RepeatStats]:
    """Each turn of ``case``'s case over its repetitions (by turn index). One query."""
    rows = (
        TurnRow.objects.filter(case__run_id=case.run_id, case__index=case.index)
        .order_by()
        .values_list("index", "outcome")
    )
    return stats_by_unit(rows)


def case_score_spreads(*, case: CaseRow) -> list[ScoreSpread]:
    """Each metric's scores over the repetitions of ``case``'s case. One query."""
    rows = (
        MetricRow.objects.filter(turn__case__run_id=case.run_id, turn__case__index=case.index)
        .order_by("position", "id")
        .values_list("metric_name", "score")
    )
    return score_spreads(rows)


def case_rows_changed_since(
    *, rows: QuerySet[CaseRow], since: datetime, most: int | None = None
) -> list[CaseRow]:
    """The rows of ``rows`` (``case_rows``) that started or finished after ``since`` (the
    progress poll swaps just these), the first ``most`` of them (by index) when given."""
    return list(rows.filter(_changed_since(since))[:most])


# --- a repeated run's case list: one row per case, its repetitions under it ------------------


def case_group_indices(cases: QuerySet[CaseRow]) -> QuerySet[Any, int]:
    """The case indices of ``cases`` (rows of one run, as ``case_rows`` filters them), each
    once and in order: a repeated run's case list counts and pages its cases by these, not its
    rows. A case is listed when any of its repetitions is among ``cases``."""
    return cases.order_by("index").values_list("index", flat=True).distinct()


class Repetition(NamedTuple):
    """One repetition as its case's row reads it (``case_groups``): a tuple, not a model, as a
    page holds a hundred cases of up to a thousand repetitions each."""

    pk: int
    case_index: int  # CaseRow.index (a tuple's ``index`` is its method)
    repetition: int
    name: str
    status: str
    outcome: str

    @property
    def label(self) -> str:
        return self.name or case_text(self.case_index)  # as CaseRow.label


REPETITION_FIELDS = ("id", "index", "repetition", "name", "status", "outcome")


def case_groups(*, run: Run, indices: Iterable[int]) -> list[list[Repetition]]:
    """Every repetition of the cases of ``run`` at ``indices`` (a list, or a query such as a
    page of ``case_group_indices``), one list per case, by index then repetition. One query."""
    rows = (
        CaseRow.objects.filter(run=run, index__in=indices)
        .order_by("index", "repetition")
        .values_list(*REPETITION_FIELDS)
    )
    groups: dict[int, list[Repetition]] = {}
    for row in rows:
        line = Repetition(*row)
        groups.setdefault(line.case_index, []).append(line)
    return list(groups.values())


def case_groups_changed_since(
    *, run: Run, cases: QuerySet[CaseRow], since: datetime, most: int | None = None
) -> list[list[Repetition]]:
    """The cases listed by ``cases`` (``case_group_indices``) any repetition of which started or
    finished after ``since``, each with all its repetitions (``case_groups``): the rows the
    progress poll swaps in; the first ``most`` of them when given. One query."""
    changed = CaseRow.objects.filter(run=run).filter(_changed_since(since)).values("index")
    indices = case_group_indices(cases.filter(index__in=Subquery(changed)))
    return case_groups(run=run, indices=indices[:most] if most is not None else indices)


def _changed_since(since: datetime) -> Q:
    return Q(finished_at__gt=since) | Q(started_at__gt=since)


def case_version(*, status: str, turns: int) -> str:
    """What an expanded case shows of itself changes when this does: its status and how many
    of its turns are written (its turns fragment polls with it while the case runs)."""
    return f"{status}.{turns}"


def case_version_get(*, run_id: int, case_id: int) -> tuple[bool, str]:
    """(whether it is running, its ``case_version``) of one case, or 404: one small query."""
    row = (
        CaseRow.objects.filter(pk=case_id, run_id=run_id)
        .annotate(written=Count("turns"))
        .values_list("status", "written")
        .first()
    )
    if row is None:
        raise Http404("no such case")
    status, written = row
    return status == CaseRow.Status.RUNNING, case_version(status=status, turns=written)


def next_failed_case(*, case: CaseRow) -> CaseRow | None:
    """The next failed case of the same run after ``case`` (by index), if any."""
    return (
        CaseRow.objects.filter(run_id=case.run_id, outcome__in=FAILURES, index__gt=case.index)
        .only("id", "run_id", "index", "name")
        .order_by("index")
        .first()
    )


def case_get(*, run_id: int, case_id: int) -> CaseRow:
    """One case with its run, turns and each turn's metrics (three queries).

    The case pages read only the run's id, agent name and status, so the run's project is not
    joined and its large text/JSON columns stay in the database.
    """
    turns = TurnRow.objects.order_by("index").prefetch_related(
        Prefetch("metrics", queryset=MetricRow.objects.order_by("position", "id"))
    )
    return get_object_or_404(
        CaseRow.objects.select_related("run")
        .defer(*(f"run__{name}" for name in CASE_PAGE_UNUSED_RUN_FIELDS))
        .prefetch_related(Prefetch("turns", queryset=turns)),
        pk=case_id,
        run_id=run_id,
    )


def case_run_repeats(case: CaseRow) -> int:
    """How many times the run of ``case`` (read by ``case_get``) ran each case."""
    return case.run.repeats


def case_summary(*, case: CaseRow) -> RunSummary:
    """The case's own summary (its turns, their tool verdicts and metrics, counted as a run's
    are; four queries)."""
    return summary_of_rows(case.run_id, case_id=case.pk)

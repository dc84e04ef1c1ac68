"""Compare runs: headline deltas, the case x turn matrix, one case's turns in every compared run
side by side, config diff.

Every part of the compare page is filtered by metric kind (``?kinds=code,tools``), and every
setting is in the URL, so a filtered compare can be shared. The runs are laid out against the
baseline (the default) or in commit order (``?order=commits``), each run against the one before
it; the matrix can show a chosen metric's score deltas (``?metric=``, sorted and filtered by its
drops) and keep the cases where a text occurs (``?q=``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from statistics import fmean
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import escape, format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from runs.comparison.matrix import (
    BASELINE_ORDER,
    COMMIT_ORDER,
    FIX,
    NOISE,
    ORDERS,
    REGRESSION,
    SHOW_ALIASES,
    SHOWS,
    SORTS,
    Change,
    Row,
    attach_hits,
    attach_scores,
    change_of,
    compared_with,
    rows_dropping,
    rows_matching,
    select_rows,
    sort_rows,
    verdict,
)
from runs.pricing.prices import Cost, format_cost, format_usd
from runs.sealing import SnapshotFile, snapshot_diff
from runs.selectors.compare import (
    MAX_RUNS,
    Comparison,
    Headline,
    NoBaseline,
    RunsMissing,
    case_score_samples,
    cases_by_key,
    comparison_for,
    runs_for_compare,
    runs_for_config,
    turn_hits,
)
from runs.selectors.snapshots import StoredSnapshot, snapshot_contents, stored_snapshot
from runs.stats.significance import (
    NO_EVIDENCE,
    SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_WORSE,
    ScoreResult,
    Significance,
    UnitResult,
    classify_score_changes,
)
from runs.templatetags.dashboard import duration, thousands
from runs.verdicts.kinds import KINDS, TOOLS_KIND, kind_order
from runs.verdicts.numbers import (
    NONE_TEXT,
    format_points,
    format_rate,
    format_score,
    format_score_change,
    format_score_delta,
    turn_text,
)
from runs.verdicts.outcomes import Outcome
from runs.verdicts.summary import MetricSummary, OutcomeCounts
from runs.web.diffs import (
    CONTENTS_STAFF_ONLY,
    MAX_FILE_DIFF_LINES,
    CallPair,
    FileDiff,
    config_rows,
    diff_too_large,
    file_diff,
    file_unread,
    line_diff,
    tool_call_diff,
    word_diff,
)
from runs.web.params import (
    Query,
    choice_list_param,
    choice_param,
    float_param,
    int_list_param,
    int_param,
    params_or_errors,
    shown_value,
    text_param,
)

if TYPE_CHECKING:
    from runs.models import CaseResult, MetricResult, Run, TurnResult

ROWS_PER_PAGE = 100
# What a matrix cell can say, in the order the legend explains it, with a hint where the word
# alone would not do.
LEGEND: tuple[tuple[Outcome, str], ...] = (
    (Outcome.PASSED, ""),
    (Outcome.FAILED, ""),
    (Outcome.ERROR, ""),
    (Outcome.NOT_GRADED, ""),
    (Outcome.SKIPPED, ""),
    (Outcome.CANCELLED, ""),
    (Outcome.PENDING, "no verdict yet"),
    (Outcome.NONE, "none of the selected kinds ran"),
    (Outcome.ABSENT, "not in that run"),
)
SHOW_LABELS = {"unstable": "unstable (changed back and forth)"}
UNSTABLE_HINT = (
    "a turn's verdict went from passed to failed and back (or the other way round) along the "
    "runs in commit order: a change each time, not flakiness (the runs are of different commits)"
)
ORDER_LABELS = {
    BASELINE_ORDER: "against the baseline",
    COMMIT_ORDER: "in commit order, each against the one before",
}
MAX_SEARCH = 200  # characters of ?q=
# Side by side, the most runs laid out as columns; more are stacked, one under another, each
# turn's tables (arg-match, metrics with their reasoning) at the page's width.
SIDE_BY_SIDE_MOST = 2
MAX_METRIC = 200  # MetricResult.metric_name's length


# --- the compare page -----------------------------------------------------------------------


@dataclass(frozen=True)
class CompareSettings:
    """The compare page's query parameters, read and checked."""

    run_ids: list[int]
    kinds: list[str]
    show: str  # one of SHOWS (an alias given is read as its new name)
    sort: str
    chosen: int | None  # the baseline picked
    order: str
    metric: str  # the metric whose score deltas the cells show ("" none)
    min_drop: float | None  # keep rows whose metric fell by at least this much
    q: str  # keep rows where this text occurs in a turn's input or response
    show_alias: str = ""  # the old name given for ``show`` (``flaky``), said on the page


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    # A refused value shows the page's form again with the message at its field (a 400).
    settings, errors = params_or_errors(request, _compare_params)
    if not settings.run_ids:
        context = {
            "empty": True,
            "max_runs": MAX_RUNS,
            "errors": errors,
            "bad_runs": shown_value(request, "runs", errors),
        }
        return render(request, "runs/compare.html", context, status=400 if errors else 200)
    try:
        baseline, comparison = comparison_for(
            settings.run_ids, chosen=settings.chosen, kinds=settings.kinds, order=settings.order
        )
    except RunsMissing as exc:
        raise Http404(str(exc)) from None
    except NoBaseline as exc:
        context = {"alone": exc.run, "later": exc.later, "max_runs": MAX_RUNS}
        return render(request, "runs/compare.html", context)
    settings = _checked(settings, comparison, errors)
    shown = comparison.runs
    rows = compared_rows(comparison, settings)
    page = Paginator(rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    state = {
        "runs": ",".join(str(run.pk) for run in shown),
        "baseline": str(settings.chosen) if settings.chosen is not None else "",
        "order": settings.order if settings.order != BASELINE_ORDER else "",
        "kinds": ",".join(settings.kinds),
        "show": settings.show if settings.show != "all" else "",
        "sort": settings.sort if settings.sort != "case" else "",
        "metric": settings.metric,
        "min_drop": f"{settings.min_drop:g}" if settings.min_drop is not None else "",
        "q": settings.q,
    }
    links = CellLinks.of(comparison, settings)
    views = [_row_view(row, comparison, links) for row in page.object_list]
    context = {
        "comparison": comparison,
        "baseline": baseline,
        "chosen": settings.chosen is not None and baseline.rule == "chosen by you",
        "runs": shown,
        # The compared runs (every column but the reference: the baseline, or the oldest).
        "others": [run for run in shown if run.pk in comparison.matrix.against],
        "columns": _columns(comparison),
        "kinds": settings.kinds,
        "all_kinds": KINDS,
        "settings": settings,
        "order": settings.order,
        "chronological": settings.order == COMMIT_ORDER,
        "order_links": [
            (value, label, _query(state, order="" if value == BASELINE_ORDER else value))
            for value, label in ORDER_LABELS.items()
        ],
        "show": settings.show,
        "shows": [(value, SHOW_LABELS.get(value, value)) for value in SHOWS],
        "show_alias": settings.show_alias,
        "unstable_hint": UNSTABLE_HINT,
        "sort": settings.sort,
        "sorts": SORTS,
        "metric": settings.metric,
        "metrics": _metric_choices(comparison),
        "lines": headline_lines(
            comparison.headlines,
            settings.kinds,
            _against_positions(shown, comparison),
            repeated=comparison.repeated,
        )
        + significance_lines(comparison),
        "significance": bool(comparison.significance),
        "legend": LEGEND,
        "kind_changes": _kind_changes(comparison),
        "changed_cases": [
            headline.changed
            for headline in comparison.headlines
            if headline.run.pk in comparison.matrix.against
        ],
        "page": page,
        "rows": views,
        "matrix_html": matrix_html(views),
        "state": state,
        "query": _query(state),
        "errors": errors,
        "bad_min_drop": shown_value(request, "min_drop", errors),
        "bad_q": shown_value(request, "q", errors),
    }
    return render(request, "runs/compare.html", context, status=400 if errors else 200)


def _compare_params(request: Query) -> CompareSettings:
    """The compare page's settings; each refused one is a ``BadParam`` naming it."""
    show = choice_param(request, "show", (*SHOWS, *SHOW_ALIASES)) or "all"
    return CompareSettings(
        run_ids=int_list_param(request, "runs", most=MAX_RUNS),
        kinds=choice_list_param(request, "kinds", KINDS),
        show=SHOW_ALIASES.get(show, show),
        show_alias=show if show in SHOW_ALIASES else "",
        sort=choice_param(request, "sort", SORTS) or "case",
        chosen=int_param(request, "baseline"),
        order=choice_param(request, "order", ORDERS) or BASELINE_ORDER,
        metric=text_param(request, "metric", max_length=MAX_METRIC),
        min_drop=float_param(request, "min_drop", minimum=0, maximum=1),
        q=text_param(request, "q", max_length=MAX_SEARCH),
    )


def _checked(
    settings: CompareSettings, comparison: Comparison, errors: dict[str, str]
) -> CompareSettings:
    """The settings that depend on the runs: the metric must be one of theirs, and sorting by
    delta or a minimum drop needs a metric. A refused one is left out, its message added to
    ``errors`` at its field."""
    metric, sort, min_drop = settings.metric, settings.sort, settings.min_drop
    if metric and metric not in comparison.metric_names:
        errors["metric"] = f"no metric “{metric[:60]}” in these runs: pick one of the list"
        metric = ""
    if sort == "delta" and not metric:
        errors.setdefault("sort", "sorting by delta needs a metric: pick one")
        sort = "case"
    if min_drop is not None and not metric:
        errors.setdefault("min_drop", "a minimum drop needs a metric: pick one")
        min_drop = None
    return replace(settings, metric=metric, sort=sort, min_drop=min_drop)


def _score_significance(
    comparison: Comparison, samples: dict[int, list[float]]
) -> dict[int, dict[str, ScoreResult]]:
    """Per run, each case's scores over its repetitions against the compared run's
    (Mann–Whitney, Benjamini–Hochberg over the cases; ``runs.stats.significance``)."""
    found = {}
    for run_id, other in comparison.matrix.against.items():
        units = {
            row.key: (samples[row.case_ids[other]], samples[row.case_ids[run_id]])
            for row in comparison.matrix.rows
            if row.case_ids.get(other) in samples and row.case_ids.get(run_id) in samples
        }
        found[run_id] = classify_score_changes(units)
    return found


def compared_rows(comparison: Comparison, settings: CompareSettings) -> list[Row]:
    """The matrix's rows the settings keep, in their order: with a metric, each row carries its
    cases' scores and deltas (1 query); with a search, only the rows where the text occurs
    (1 query)."""
    matrix = comparison.matrix
    if settings.metric:
        samples = case_score_samples(matrix.run_ids, settings.metric)
        attach_scores(matrix, {case_id: fmean(scores) for case_id, scores in samples.items()})
        if comparison.significance:  # repeated runs: is each case's score change real?
            comparison.score_significance = _score_significance(comparison, samples)
    if settings.q:
        attach_hits(matrix, turn_hits(matrix.run_ids, settings.q))
    rows = select_rows(matrix.rows, settings.show)
    if settings.q:
        rows = rows_matching(rows)
    if settings.min_drop is not None:
        rows = rows_dropping(rows, settings.min_drop)
    return sort_rows(rows, settings.sort)


def _query(state: dict[str, str], **changes: str) -> str:
    """The page's query string with ``changes`` (empty values left out)."""
    return urlencode({k: v for k, v in {**state, **changes}.items() if v})


def _metric_choices(comparison: Comparison) -> list[tuple[str, str]]:
    """(name, label) of every metric of the runs, for the metric select."""
    kinds: dict[str, set[str]] = {}
    for headline in comparison.headlines:
        for metric in headline.summary.metrics:
            kinds.setdefault(metric.name, set()).add(metric.kind)
    return [
        (name, f"{name} ({', '.join(sorted(kinds[name], key=kind_order))})")
        for name in comparison.metric_names
    ]


@dataclass(frozen=True)
class Column:
    """A run's column head: the run and the run it is compared with (None: the reference)."""

    run: Run
    against: Run | None

    @property
    def label(self) -> str:
        return "" if self.against is None else f"vs #{self.against.pk}"


def _columns(comparison: Comparison) -> list[Column]:
    return [Column(run, comparison.against(run)) for run in comparison.runs]


def _against_positions(runs: Sequence[Run], comparison: Comparison) -> list[int | None]:
    """Per column, the position of the column it is compared with (None: the reference)."""
    position = {run.pk: index for index, run in enumerate(runs)}
    return [position.get(comparison.matrix.against.get(run.pk, -1)) for run in runs]


def significance_lines(comparison: Comparison) -> list[Line]:
    """With a repeated run among them: per run, how many cases and turns changed significantly
    against the run it is compared with and how many changes are within noise, and the
    pass-rate change with its confidence interval (over the cases both have)."""
    if not comparison.significance:
        return []
    cases: list[Cell] = []
    turns: list[Cell] = []
    rates: list[Cell] = []
    for run in comparison.runs:
        found = comparison.significance.get(run.pk)
        if found is None:
            for cells in (cases, turns, rates):
                cells.append(Cell(run.pk, "–"))
            continue
        cases.append(Cell(run.pk, _changes_text(found.cases), trend=_trend_of(found.cases)))
        turns.append(Cell(run.pk, _changes_text(found.turns), trend=_trend_of(found.turns)))
        rate = found.pass_rate
        text = format_points(rate.difference)
        if rate.ci_low is not None and rate.ci_high is not None:
            text += f" ({format_points(rate.ci_low)} to {format_points(rate.ci_high)})"
        rates.append(Cell(run.pk, text))
    confidence = next(iter(comparison.significance.values())).pass_rate.confidence
    return [
        Line("significant changes, cases", cases, summary="significance.cases"),
        Line("significant changes, turns", turns, summary="significance.turns"),
        Line(f"pass-rate change ({confidence * 100:g} % interval)", rates),
    ]


def _changes_text(found: Significance) -> str:
    return f"{found.worse} worse · {found.better} better · {found.noise} within noise"


def _trend_of(found: Significance) -> str:
    return "worse" if found.worse else "better" if found.better else ""


# --- headline deltas ------------------------------------------------------------------------
# The headline is each run's own summary (what its run page shows: case and turn counts, the
# pass rate, per metric the turns it graded), whatever the kind filter; each number is marked
# with ``data-summary`` (and ``data-metric``, ``data-run``) so a test can read it back. Each
# delta is against the column the run is compared with (the baseline, or the run before it).


@dataclass(frozen=True)
class Cell:
    run_id: int
    text: str
    delta: str = ""
    trend: str = ""  # "better", "worse", "" (same, not comparable, or the reference)
    metric: MetricSummary | None = None  # on a metric's line: its per-turn counts


@dataclass(frozen=True)
class Line:
    label: str
    cells: list[Cell]
    kind: str = ""
    summary: str = ""  # the summary number its cells show (data-summary), if any
    metric: str = ""  # the metric it is about (data-metric), if any
    kind_rate: bool = False  # the pass rate over the selected kinds only


Number = float | int | None
Against = Sequence[int | None]  # per column: the position of the column it is compared with
# (label, field of OutcomeCounts, which way is better; None: never coloured)
COUNT_LINES: tuple[tuple[str, str, str | None], ...] = (
    ("passed", Outcome.PASSED.value, "higher"),
    ("failed", Outcome.FAILED.value, "lower"),
    (Outcome.ERROR.label, Outcome.ERROR.value, "lower"),
    # "Not graded" is neither a pass nor a failure: shown, never coloured.
    (Outcome.NOT_GRADED.label, Outcome.NOT_GRADED.value, None),
)
ALWAYS_SHOWN = frozenset({Outcome.PASSED.value, Outcome.FAILED.value})
# The other outcomes a cell can show, each a line where a run has any (never coloured, and not
# marked data-summary: the run page shows them as words, not as summary numbers).
OTHER_COUNT_LINES: tuple[tuple[str, str], ...] = tuple(
    (outcome.label, outcome.value)
    for outcome in (Outcome.SKIPPED, Outcome.CANCELLED, Outcome.PENDING)
)


def _first_against(count: int) -> list[int | None]:
    return [None] + [0] * (count - 1)


def headline_lines(
    headlines: Sequence[Headline],
    kinds: Sequence[str] = (),
    against: Against | None = None,
    *,
    repeated: bool = False,
) -> list[Line]:
    """One line per measure, one cell per run; deltas against the column each run is compared
    with (``against``; by default the first, the baseline). ``repeated``: a run has repeats,
    so cases are counted as the matrix shows them (each once, by its verdict over its
    repetitions), the runs' own counts (every repetition) as "repetitions", and the turns and
    pass rate say they are over repetitions."""
    ids = [h.run.pk for h in headlines]
    pairs = list(against) if against is not None else _first_against(len(headlines))

    def line(
        label: str,
        values: list[Number],
        shown: Callable[[Any], str],
        better: str | None,
        **options: Any,
    ) -> Line:
        return _line(label, ids, values, shown, better, against=pairs, **options)

    rates = [h.pass_rate for h in headlines]
    rate_label = "pass rate, over repetitions" if repeated else "pass rate"
    lines = [line(rate_label, rates, format_rate, "higher", points=True, summary="pass_rate")]
    if kinds:
        lines.append(
            line(
                f"pass rate, {' + '.join(kinds)} only",
                [h.kind_pass_rate for h in headlines],
                format_rate,
                "higher",
                points=True,
                kind_rate=True,
            )
        )
    lines += _count_lines(headlines, line, repeated=repeated)
    tools = [h.tool_pass_rate for h in headlines]
    if any(rate is not None for rate in tools):
        lines.append(line("tool assertions (turns)", tools, format_rate, "higher", points=True))
    lines += _metric_lines(headlines, pairs)
    lines += [
        line("tokens", [h.tokens for h in headlines], thousands, "lower"),
        line("agent time", [h.agent_ms for h in headlines], duration, "lower"),
        line("judge time", [h.judge_ms or None for h in headlines], duration, "lower"),
    ]
    lines += _cost_lines(headlines, pairs)
    return lines


def _count_lines(
    headlines: Sequence[Headline], line: Callable[..., Line], *, repeated: bool
) -> list[Line]:
    """The cases and turns by outcome. Each number marked ``data-summary`` is the run's
    summary's; with repeats, the cases (merged over their repetitions, as the matrix counts
    them) are not: the summary's case counts are then its repetitions."""
    scopes: list[tuple[str, str, Callable[[Headline], OutcomeCounts], str]] = [
        ("cases", "cases", lambda h: h.summary.cases, "cases"),
        ("turns", "turns", lambda h: h.summary.turns, "turns"),
    ]
    if repeated:
        scopes = [
            ("cases", "cases", lambda h: h.cases, ""),
            ("repetitions", "repetitions", lambda h: h.summary.cases, "cases"),
            ("turns, over repetitions", "turns", lambda h: h.summary.turns, "turns"),
        ]
    lines = []
    for label, prefix, counts_of, summary in scopes:
        lines.append(line(label, [counts_of(h).total for h in headlines], str, None))
        for word, name, better in COUNT_LINES:
            values = [getattr(counts_of(h), name) for h in headlines]
            if name in ALWAYS_SHOWN or any(values):
                marked = f"{summary}.{name}" if summary else ""
                lines.append(line(f"{prefix} {word}", values, str, better, summary=marked))
        for word, name in OTHER_COUNT_LINES:
            values = [getattr(counts_of(h), name) for h in headlines]
            if any(values):
                lines.append(line(f"{prefix} {word}", values, str, None))
    return lines


def _cost_lines(headlines: Sequence[Headline], against: Against) -> list[Line]:
    """The whole run's cost, then the agent's and the judges' (runs.pricing.prices): "unknown
    price" where a model has none, and a change only between two known costs."""
    error = next((h.cost_error for h in headlines if h.cost_error), None)
    if error is not None:
        return [Line("cost", [Cell(h.run.pk, error) for h in headlines])]
    lines = []
    for label, part in (
        ("cost", lambda c: c.both),
        ("agent cost", lambda c: c.agent),
        ("judge cost", lambda c: c.judge),
    ):
        costs = [part(h.cost) if h.cost is not None else Cost() for h in headlines]
        cells = [
            _cost_cell(h.run.pk, cost, None if other is None else costs[other])
            for h, cost, other in zip(headlines, costs, against, strict=True)
        ]
        lines.append(Line(label, cells))
    return lines


def _cost_cell(run_id: int, cost: Cost, base: Cost | None) -> Cell:
    text = format_cost(cost)
    if base is None or not (cost.known and base.known) or cost.usd == base.usd:
        return Cell(run_id, text)
    change = cost.usd - base.usd
    delta = ("+" if change > 0 else "−") + format_usd(abs(change))
    return Cell(run_id, text, delta, "worse" if change > 0 else "better")


def _line(
    label: str,
    run_ids: list[int],
    values: list[Number],
    shown: Callable[[Any], str],
    better: str | None,
    *,
    against: Against,
    points: bool = False,
    kind: str = "",
    summary: str = "",
    kind_rate: bool = False,
    metrics: list[MetricSummary | None] | None = None,
) -> Line:
    cells = []
    for position, (run_id, value) in enumerate(zip(run_ids, values, strict=True)):
        metric = metrics[position] if metrics else None
        text = shown(value) if value is not None else NONE_TEXT
        other = against[position]
        base = None if other is None else values[other]
        if other is None or value is None or base is None or value == base:
            same = "" if other is None or value is None or base is None else "±0"
            cells.append(Cell(run_id, text, same, metric=metric))
            continue
        change = value - base
        if points:
            delta = format_points(change)
        elif shown is duration:
            delta = ("+" if change > 0 else "−") + duration(abs(change))
        elif isinstance(change, float):
            delta = format_score_change(change)
        else:
            delta = f"{change:+d}"
        trend = ""
        if better is not None:
            trend = "better" if (change > 0) == (better == "higher") else "worse"
        cells.append(Cell(run_id, text, delta, trend, metric))
    return Line(label, cells, kind, summary, "", kind_rate)


def _metric_lines(headlines: Sequence[Headline], against: Against) -> list[Line]:
    """Per metric (of the selected kinds), its average score and, under it, the turns it
    graded, passed, failed and could not grade: the run's summary, per turn."""
    ids = [h.run.pk for h in headlines]
    found: dict[tuple[str, str], list[MetricSummary | None]] = {}
    for position, headline in enumerate(headlines):
        for metric in headline.metrics:
            found.setdefault((metric.kind, metric.name), [None] * len(headlines))[position] = metric
    lines = []
    for (kind, name), metrics in sorted(found.items(), key=lambda item: _metric_order(item[0])):
        averages = [metric.average if metric else None for metric in metrics]
        line = _line(
            name, ids, averages, format_score, "higher", against=against, kind=kind, metrics=metrics
        )
        lines.append(Line(line.label, line.cells, kind, metric=name))
    return lines


def _metric_order(key: tuple[str, str]) -> tuple[int, str]:
    kind, name = key
    return kind_order(kind), name


def _kind_changes(comparison: Comparison) -> list[tuple[str, list[tuple[int, int]]]]:
    """Per kind, (regressions, fixes) of each compared run (every column but the reference),
    in the columns' order."""
    others = [run.pk for run in comparison.runs if run.pk in comparison.matrix.against]
    return [
        (kind, [counts.get(run_id, (0, 0)) for run_id in others])
        for kind, counts in comparison.matrix.by_kind.items()
    ]


# --- the matrix -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnMark:
    index: int
    verdict: Outcome
    change: Change | None  # against the compared run's same turn
    hit: bool = False  # the searched text occurs in it


@dataclass(frozen=True)
class CellView:
    run_id: int
    verdict: Outcome
    case_id: int | None
    turns: list[TurnMark]
    link: str
    is_baseline: bool  # the reference column: compared with no run
    against: int | None = None  # the run it is compared with
    metric: str = ""  # the chosen metric, whose score and delta the cell shows
    score: float | None = None
    delta: float | None = None
    # A repeated run's case: (passed, graded) of its repetitions.
    repetitions: tuple[int, int] | None = None
    # Against the compared run, over their repetitions (runs.stats.significance): the case's
    # verdicts, and the chosen metric's scores.
    significance: UnitResult | None = None
    score_significance: ScoreResult | None = None


@dataclass(frozen=True)
class RowView:
    row: Row
    cells: list[CellView]
    hit_link: str = ""  # the side by side at the first turn where the text occurs


@dataclass(frozen=True)
class CellLinks:
    """The parts of the matrix's links that every row shares: the side by side of all the
    compared runs (in the columns' order) with the page's order, kinds and search."""

    side: str  # "/compare/case/?runs=...&order=...&kinds=...&q=..." (the key goes last)
    metric: str

    @classmethod
    def of(cls, comparison: Comparison, settings: CompareSettings) -> CellLinks:
        # The ids with plain commas (a query string may hold them): a page has hundreds of
        # these links, and "%2C" between a dozen ids is kilobytes.
        runs = ",".join(str(run.pk) for run in comparison.runs)
        baseline = comparison.baseline.pk
        query = {
            # The reference column, wherever it is (the columns are oldest first).
            "baseline": str(baseline)
            if settings.order == BASELINE_ORDER and baseline != comparison.runs[0].pk
            else "",
            "order": settings.order if settings.order != BASELINE_ORDER else "",
            "kinds": ",".join(settings.kinds),
            "q": settings.q,
        }
        rest = urlencode({k: v for k, v in query.items() if v})
        return cls(f"/compare/case/?runs={runs}" + (f"&{rest}" if rest else ""), settings.metric)

    def case(self, key_query: str, turn: int | None = None) -> str:
        return f"{self.side}&{key_query}" + (f"#turn-{turn}" if turn is not None else "")


def _row_view(row: Row, comparison: Comparison, links: CellLinks) -> RowView:
    against = comparison.matrix.against
    key_query = urlencode({"key": row.key})
    cells = []
    for run in comparison.runs:
        other = against.get(run.pk)
        hits = frozenset(row.hits.get(run.pk, ()))
        changes = row.marks.get(run.pk, ())
        marks = [
            TurnMark(
                index,
                line[run.pk],
                changes[index] if index < len(changes) else None,
                index in hits,
            )
            for index, line in enumerate(row.turns)
        ]
        case_id = row.case_ids.get(run.pk)
        if case_id is None:
            link = ""
        elif other is None:
            link = f"/runs/{run.pk}/cases/{case_id}/"
        else:
            link = links.case(key_query, _first_turn(marks))
        cells.append(
            CellView(
                run_id=run.pk,
                verdict=row.cells[run.pk],
                case_id=case_id,
                turns=marks,
                link=link,
                is_baseline=other is None,
                against=other,
                metric=links.metric,
                score=row.scores.get(run.pk),
                delta=row.deltas.get(run.pk),
                repetitions=comparison.repetitions.get(case_id) if case_id else None,
                significance=_case_significance(comparison, run.pk, row.key),
                score_significance=comparison.score_significance.get(run.pk, {}).get(row.key),
            )
        )
    hit_turns = sorted({index for found in row.hits.values() for index in found})
    hit_link = links.case(key_query, hit_turns[0]) if hit_turns else ""
    return RowView(row, cells, hit_link)


def _case_significance(comparison: Comparison, run_id: int, key: str) -> UnitResult | None:
    found = comparison.significance.get(run_id)
    return found.cases.units.get(key) if found is not None else None


def _first_turn(marks: list[TurnMark]) -> int | None:
    """The turn a cell's link opens at: the first where the text occurs, else the first that
    changed (None: the top of the page)."""
    for wanted in (lambda m: m.hit, lambda m: m.change is not None):
        found = next((mark.index for mark in marks if wanted(mark)), None)
        if found is not None:
            return found
    return None


def matrix_html(rows: list[RowView]) -> SafeString:
    """The matrix's rows, rendered here rather than in the template: a page holds a hundred
    rows of up to a dozen cells of up to a handful of turns each, and the template engine (or
    format_html, value by value) would spend most of the page's time on them. Every value that
    is not one of ours (a case key, a metric name, a link holding them) is escaped."""
    return mark_safe("\n".join(_row_html(view) for view in rows))


def _row_html(view: RowView) -> str:
    row = view.row
    classes = " ".join(
        name
        for name, on in (
            ("has-regression", row.regressions),
            ("partial", row.partial),
            ("has-hit", row.hits),
        )
        if on
    )
    changes = []
    if row.regressions:
        changes.append(f'<span class="worse">{_turns(row.regressions)} regressed</span>')
    if row.fixes:
        changes.append(f'<span class="better">{_turns(row.fixes)} fixed</span>')
    if row.noise:
        changes.append(
            f'<span class="chip chip-muted noise" title="{NOISE_HINT}">'
            f"{_turns(row.noise)} changed within noise</span>"
        )
    changes += [_verdict_change_html(view, run_id) for run_id in _other_changes(row)]
    if row.unstable:
        changes.append(_UNSTABLE_CHIP)
    if row.partial:
        changes.append('<span class="chip chip-muted">not in every run</span>')
    if view.hit_link:
        turns = sorted({index + 1 for found in row.hits.values() for index in found})
        where = f"turn{'s' if len(turns) > 1 else ''} {', '.join(map(str, turns))}"
        changes.append(f'<a class="hit-link" href="{escape(view.hit_link)}">match in {where}</a>')
    key = escape(row.key)
    cells = "".join(_cell_html(cell) for cell in view.cells)
    return (
        f'<tr class="matrix-row {classes}" data-key="{key}"><th scope="row" class="case-key">'
        f'{key}</th>{cells}<td class="small">{" ".join(changes)}</td></tr>'
    )


NOISE_HINT = (
    "the verdict moved, but not more than the repetitions' own variation: not significant "
    "(Fisher's exact test, Benjamini–Hochberg), so neither a regression nor a fix"
)


def _turns(count: int) -> str:
    return f"{count} turn{'s' if count != 1 else ''}"


def _other_changes(row: Row) -> list[int]:
    """The runs where a verdict of the row differs from the compared run's with no regression,
    fix or change within noise of a turn to say so (cancelled -> failed, not graded -> ...)."""
    # ``row.changes`` holds every run with a regression, a fix or a change within noise.
    return [run_id for run_id in row.changed_in if run_id not in row.changes]


def _verdict_change_html(view: RowView, run_id: int) -> str:
    """A changed verdict that is neither a regression nor a fix: the case's from -> to, or
    that a turn's verdict differs."""
    cells = {cell.run_id: cell for cell in view.cells}
    cell = cells[run_id]
    before = cells[cell.against].verdict if cell.against in cells else Outcome.ABSENT
    if before != cell.verdict:
        text = f"{before.label} → {cell.verdict.label}"
    else:
        text = "a turn's verdict changed"
    title = (
        f"#{run_id} against #{cell.against}: a verdict differs, but no turn went from a graded "
        "pass to a fail or the other way round, so it is neither a regression nor a fix"
    )
    return f'<span class="chip chip-muted verdict-change" title="{title}">{text}</span>'


_UNSTABLE_CHIP = (
    f'<span class="chip chip-notgraded unstable" title="{UNSTABLE_HINT}">'
    "changed back and forth</span>"
)


def _cell_html(cell: CellView) -> str:
    verdict = cell.verdict
    if cell.link:
        label = verdict.label
        link = escape(cell.link)
        chip = f'<a href="{link}" class="cv cv-{verdict.value}" title="{label}">{label}</a>'
    else:
        chip = _chip_html(verdict)
    dots = ""
    if len(cell.turns) > 1 or any(mark.hit for mark in cell.turns):
        total = len(cell.turns)
        marks = "".join(
            _dot_html(mark.index, total, mark.verdict, mark.change, mark.hit) for mark in cell.turns
        )
        dots = f'<span class="turn-dots">{marks}</span>'
    extra = _repetitions_html(cell) + _significance_html(cell)
    return f'<td class="cell">{chip}{_score_html(cell)}{extra}{dots}</td>'


def _repetitions_html(cell: CellView) -> str:
    if cell.repetitions is None:
        return ""
    passed, graded = cell.repetitions
    return (
        f' <span class="rep-frac" title="passed in {passed} of its {graded} graded '
        f'repetition{"s" if graded != 1 else ""}">{passed}/{graded}</span>'
    )


def _significance_html(cell: CellView) -> str:
    """Whether the case's change against the compared run is significant (a chip), or within
    noise (a quiet mark where the verdict changed)."""
    unit = cell.significance
    if unit is None or cell.against is None:
        return ""
    detail = (
        f"{unit.passed_before}/{unit.n_before} → {unit.passed_after}/{unit.n_after} passed "
        f"against #{cell.against}; p {unit.p:.3g}, adjusted q {unit.q:.3g}"
    )
    if unit.classification == SIGNIFICANTLY_WORSE:
        return f' <span class="sig sig-worse" title="{detail}">significantly worse</span>'
    if unit.classification == SIGNIFICANTLY_BETTER:
        return f' <span class="sig sig-better" title="{detail}">significantly better</span>'
    if unit.changed:
        why = f"; {unit.reason}" if unit.reason else ""
        return f' <span class="sig sig-noise" title="{detail}{why}">no evidence</span>'
    return ""


def _score_html(cell: CellView) -> str:
    """The chosen metric's delta against the compared cell (its score where there is none to
    compare with); nothing where the case has no stored score of it."""
    if not cell.metric or cell.score is None:
        return ""
    name, score = escape(cell.metric), format_score(cell.score)
    if cell.delta is None:
        why = "" if cell.against is None else f" (none in #{cell.against} to compare with)"
        return f' <span class="score-delta score-only" title="{name} {score}{why}">{score}</span>'
    delta = format_score_delta(cell.delta)
    trend = "worse" if cell.delta < 0 else "better" if cell.delta > 0 else "same"
    title = f"{name} {score} ({delta} against #{cell.against})"
    return (
        f' <span class="score-delta {trend}" data-delta="{cell.delta:.6g}" title="{title}">'
        f"{delta}</span>{_score_significance_html(cell, name)}"
    )


def _score_significance_html(cell: CellView, name: str) -> str:
    found = cell.score_significance
    if found is None or found.classification == NO_EVIDENCE:
        return ""
    worse = found.classification == SIGNIFICANTLY_WORSE
    change = found.change
    title = (
        f"{name} over the repetitions: {change.n_before} scores → {change.n_after}, "
        f"Mann–Whitney p {change.p:.3g}, adjusted q {found.q:.3g}"
    )
    word, tone = ("significant drop", "worse") if worse else ("significant rise", "better")
    return f' <span class="sig sig-{tone} sig-score" title="{title}">{word}</span>'


@cache
def _chip_html(verdict: Outcome) -> str:
    return f'<span class="cv cv-{verdict.value}">{verdict.label}</span>'


@cache
def _dot_html(index: int, total: int, verdict: Outcome, change: Change | None, hit: bool) -> str:
    """A turn's dot (a few distinct ones on a page: each drawn once)."""
    said = "changed within noise" if change == NOISE else change
    title = f"{turn_text(index, total)}: {verdict.label}" + (f" ({said})" if said else "")
    if hit:
        title += " · the text searched for occurs in it"
    classes = " ".join(part for part in (change or "", "hit" if hit else "") if part)
    return f'<span class="dot cv-{verdict.value} {classes}" title="{title}"></span>'


# --- one case, every compared run, turn by turn ---------------------------------------------


@login_required
@require_GET
def compare_case(request: HttpRequest) -> HttpResponse:
    """The case ``key`` in every run of ``runs`` (2–12, as columns in that order), turn by
    turn (``turn``: only that one, by its stored index): each run against the baseline
    (``baseline``, one of them; by default the first) or, with ``order=commits``, against the
    run before it (3 queries)."""
    runs = _compared_runs(request)
    picked = int_param(request, "baseline")
    baseline = next((run for run in runs if run.pk == picked), runs[0])
    key = text_param(request, "key", max_length=600)
    if not key:
        raise BadRequest("?key= names the case to compare (its name, or #index)")
    kinds = choice_list_param(request, "kinds", KINDS)
    order = choice_param(request, "order", ORDERS) or BASELINE_ORDER
    q = text_param(request, "q", max_length=MAX_SEARCH)
    chosen = int_param(request, "turn", maximum=10_000)
    cases = {case.run_id: case for case in cases_by_key([run.pk for run in runs], key)}
    if not cases:
        raise Http404(f"no run has a case {key!r}")
    # A repeated run's column is one repetition: whether the case changed is said over all of
    # them (the compare page's significance), never by one repetition against another.
    repeated = {
        run_id for run_id, case in cases.items() if getattr(case, "repetition_count", 1) > 1
    }
    turns = {run_id: list(case.turns.all()) for run_id, case in cases.items()}
    count = max((len(found) for found in turns.values()), default=0)
    if chosen is not None and chosen >= count:
        raise BadRequest(
            f"?turn= is a turn's index: the case has {count} turn(s), 0 to {count - 1}"
        )
    against = compared_with([run.pk for run in runs], baseline.pk, order)
    indexes = range(count) if chosen is None else [chosen]
    base_query = {
        "runs": ",".join(str(run.pk) for run in runs),
        "baseline": str(baseline.pk) if baseline.pk != runs[0].pk else "",
        "key": key,
        "order": order if order != BASELINE_ORDER else "",
        "kinds": ",".join(kinds),
        "q": q,
    }
    sections = [
        replace(
            _turn_across(index, runs, cases, turns, against, kinds, q, repeated),
            only_link=_query(base_query, turn=str(index)),
        )
        for index in indexes
    ]
    context = {
        "runs": runs,
        "left": baseline,
        "key": key,
        "cases": cases,
        "columns": [
            Column(run, next((r for r in runs if r.pk == against.get(run.pk)), None))
            for run in runs
        ],
        "missing": [run for run in runs if run.pk not in cases],
        "repeated": [run for run in runs if run.pk in repeated],
        # Two runs side by side; more, one under another: a turn's tables need the width.
        "stacked": len(runs) > SIDE_BY_SIDE_MOST,
        "sections": sections,
        "turn_total": count,
        "chosen": chosen,
        "turn_links": [
            (index, _query(base_query, turn=str(index)), index == chosen) for index in range(count)
        ],
        "all_turns_link": _query(base_query),
        "kinds": kinds,
        "order": order,
        "chronological": order == COMMIT_ORDER,
        "q": q,
        "back": "/compare/?"
        + _query(
            {
                "runs": base_query["runs"],
                "baseline": str(baseline.pk) if order == BASELINE_ORDER else "",
                "order": base_query["order"],
                "kinds": base_query["kinds"],
                "q": q,
            }
        ),
    }
    return render(request, "runs/compare_case.html", context)


def _compared_runs(request: HttpRequest) -> list[Run]:
    run_ids = int_list_param(request, "runs", most=MAX_RUNS)
    if len(run_ids) < 2:
        raise BadRequest(
            f"?runs= takes 2 to {MAX_RUNS} run ids: the baseline (or the oldest), then the runs "
            "to compare"
        )
    runs = runs_for_compare(run_ids)
    if len(runs) != len(run_ids):
        raise Http404("no such run")
    return runs


@dataclass(frozen=True)
class MetricCell:
    """One run's result of a metric on a turn, and its score's change against the compared
    run's (None: either has no score)."""

    metric: MetricResult | None
    delta: float | None

    @property
    def delta_text(self) -> str:
        return format_score_delta(self.delta)


@dataclass(frozen=True)
class MetricAcross:
    name: str
    kind: str
    cells: list[MetricCell]  # one per run, in the columns' order

    @property
    def changed(self) -> bool:
        first = self.cells[0].metric
        return any(
            (cell.metric is None) != (first is None)
            or (
                cell.metric is not None
                and first is not None
                and (cell.metric.outcome, cell.metric.score) != (first.outcome, first.score)
            )
            for cell in self.cells
        )


@dataclass(frozen=True)
class RunTurn:
    """One run's column of a turn: the turn (None: the run lacks it), its verdict under the kind
    filter and its change against the compared run's, the response as a word diff and the tool
    calls call by call against it."""

    run: Run
    case: CaseResult | None
    turn: TurnResult | None
    against: Run | None
    verdict: Outcome
    change: Change | None
    response_diff: SafeString | None  # None: the reference, or a side without the turn
    calls: list[CallPair]
    # Where the searched text occurs: (in what, a snippet with it marked), input then response.
    excerpts: list[tuple[str, SafeString]]

    @property
    def hit(self) -> bool:
        return bool(self.excerpts)

    @property
    def anchor(self) -> str:
        """The prefix of its turn's anchor (two runs' turns share one page)."""
        return f"run-{self.run.pk}-"

    @property
    def response_changed(self) -> bool:
        diff = self.response_diff
        return diff is not None and ("<ins>" in diff or "<del>" in diff)

    @property
    def calls_changed(self) -> list[CallPair]:
        return [call for call in self.calls if not call.same]


@dataclass(frozen=True)
class TurnAcross:
    """One turn of the case in every compared run."""

    index: int
    columns: list[RunTurn]
    metrics: list[MetricAcross]
    show_tools: bool
    only_link: str = ""  # the query string of the page showing this turn alone

    @property
    def regressed(self) -> list[Run]:
        return [column.run for column in self.columns if column.change == REGRESSION]

    @property
    def fixed(self) -> list[Run]:
        return [column.run for column in self.columns if column.change == FIX]

    @property
    def change(self) -> Change | None:
        """ "regression" if a run regressed on it, else "fix" if one was fixed, else None."""
        return REGRESSION if self.regressed else FIX if self.fixed else None

    @property
    def hit(self) -> bool:
        return any(column.hit for column in self.columns)

    @property
    def changed(self) -> bool:
        """Anything to look at: a verdict, a response, a call, a metric differs."""
        if self.change or any(column.turn is None for column in self.columns):
            return True
        first = self.columns[0].turn
        assert first is not None
        for column in self.columns[1:]:
            turn = column.turn
            assert turn is not None
            if (turn.response, turn.outcome) != (first.response, first.outcome):
                return True
            if column.calls_changed:
                return True
        return any(metric.changed for metric in self.metrics)


def _turn_across(
    index: int,
    runs: list[Run],
    cases: dict[int, CaseResult],
    turns: dict[int, list[TurnResult]],
    against: dict[int, int],
    kinds: list[str],
    q: str,
    repeated: frozenset[int] | set[int] = frozenset(),
) -> TurnAcross:
    """One turn in every run; ``repeated``: the runs whose column is one repetition of the
    case, which is never marked regressed or fixed against another run's."""
    of_run = {
        run.pk: (turns[run.pk][index] if index < len(turns.get(run.pk, [])) else None)
        for run in runs
    }
    by_id = {run.pk: run for run in runs}
    columns = []
    for run in runs:
        turn, other = of_run[run.pk], against.get(run.pk)
        before = of_run.get(other) if other is not None else None
        diff, calls = None, []
        if other is not None and turn is not None and before is not None:
            diff = word_diff(before.response, turn.response)
            calls = _calls(before, turn, other, run.pk)
        columns.append(
            RunTurn(
                run=run,
                case=cases.get(run.pk),
                turn=turn,
                against=by_id.get(other) if other is not None else None,
                verdict=_turn_verdict(turn, kinds),
                change=None
                if other is None or {run.pk, other} & repeated
                else change_of(_turn_verdict(before, kinds), _turn_verdict(turn, kinds)),
                response_diff=diff,
                calls=calls,
                excerpts=_turn_excerpts(turn, q),
            )
        )
    return TurnAcross(
        index=index,
        columns=columns,
        metrics=_metrics_across(runs, of_run, against, kinds),
        show_tools=not kinds or TOOLS_KIND in kinds,
    )


def _turn_excerpts(turn: TurnResult | None, q: str) -> list[tuple[str, SafeString]]:
    if turn is None or not q:
        return []
    found = [("input", snippet) for snippet in excerpts(turn.input, q)]
    return found + [("response", snippet) for snippet in excerpts(turn.response or "", q)]


def _calls(
    before: TurnResult | None, after: TurnResult | None, left: int, right: int
) -> list[CallPair]:
    """The two turns' tool calls call by call, the sides named by their runs."""
    pairs = tool_call_diff(
        before.tool_invocations if before else [], after.tool_invocations if after else []
    )
    named = {"only on the left": f"only in #{left}", "only on the right": f"only in #{right}"}
    return [
        CallPair(pair.index, pair.left, pair.right, [named.get(c, c) for c in pair.changes])
        for pair in pairs
    ]


EXCERPT_CHARS = 60  # of context either side of a match
MOST_EXCERPTS = 3  # per text


def excerpts(text: str, q: str) -> list[SafeString]:
    """Where ``q`` occurs in ``text`` (case folded): up to a few snippets, each the match in
    ``<mark>`` with some context either side, escaped."""
    if not q or not text:
        return []
    folded, needle = text.casefold(), q.casefold()
    if len(folded) != len(text):  # a letter that folds to several: positions would shift
        folded, needle = text.lower(), q.lower()
        if len(folded) != len(text):
            return []
    found: list[SafeString] = []
    start = 0
    while len(found) < MOST_EXCERPTS and (at := folded.find(needle, start)) != -1:
        end = at + len(needle)
        left, right = max(0, at - EXCERPT_CHARS), min(len(text), end + EXCERPT_CHARS)
        found.append(
            format_html(
                "{}{}<mark>{}</mark>{}{}",
                "…" if left else "",
                text[left:at],
                text[at:end],
                text[end:right],
                "…" if right < len(text) else "",
            )
        )
        start = end
    return found


def _turn_verdict(turn: TurnResult | None, kinds: list[str]) -> Outcome:
    if turn is None:
        return Outcome.ABSENT
    return verdict(turn.outcome, turn.kind_outcomes or {}, frozenset(kinds))


def _metrics_across(
    runs: list[Run],
    of_run: dict[int, TurnResult | None],
    against: dict[int, int],
    kinds: list[str],
) -> list[MetricAcross]:
    """Every metric of the turn in any run (in the order the runs have them), with each run's
    result and its score's delta against the compared run's."""
    results: dict[int, dict[str, MetricResult]] = {}
    names: dict[str, str] = {}  # name -> kind, in order of appearance
    for run in runs:
        turn = of_run[run.pk]
        found = {m.metric_name: m for m in turn.metrics.all()} if turn else {}
        results[run.pk] = found
        for name, result in found.items():
            names.setdefault(name, result.kind)
    across = []
    for name, kind in names.items():
        if kinds and kind not in kinds:
            continue
        cells = []
        for run in runs:
            metric = results[run.pk].get(name)
            other = against.get(run.pk)
            before = results[other].get(name) if other is not None else None
            delta = None
            if (
                metric is not None
                and before is not None
                and metric.score is not None
                and before.score is not None
            ):
                delta = metric.score - before.score
            cells.append(MetricCell(metric, delta))
        across.append(MetricAcross(name, kind, cells))
    return across


# --- config diff ----------------------------------------------------------------------------


@login_required
@require_GET
def compare_config(request: HttpRequest) -> HttpResponse:
    """The two runs' settings side by side, then every file of their snapshots that differs
    (a line diff each, for staff only: a snapshot may hold secrets) and which are identical;
    when a run has no snapshot (imported, or older than snapshots), the diff of their agent.yaml
    texts, saying why (1 query, 2 when files differ: their archives, whatever the number of
    files)."""
    run_ids = int_list_param(request, "runs", most=2)
    if len(run_ids) != 2:
        raise BadRequest("?runs= takes two run ids: the baseline, then the run to compare")
    full = text_param(request, "full", max_length=1000)
    runs = runs_for_config(run_ids)
    if len(runs) != 2:
        raise Http404("no such run")
    left, right = runs[run_ids[0]], runs[run_ids[1]]
    context: dict[str, Any] = {
        "left": left,
        "right": right,
        "rows": config_rows(_config_facts(left), _config_facts(right)),
        "full": full,
    }
    if left.snapshot is not None and right.snapshot is not None:
        context["files"] = files_compared(
            (left.pk, stored_snapshot(left.snapshot)),
            (right.pk, stored_snapshot(right.snapshot)),
            full=full,
            contents=request.user.is_staff,
        )
        return render(request, "runs/compare_config.html", context)
    yaml_left, yaml_right = _config_text(left), _config_text(right)
    context |= {
        "no_snapshot": [run for run in (left, right) if run.snapshot is None],
        "diff": line_diff(yaml_left, yaml_right, labels=(f"run #{left.pk}", f"run #{right.pk}")),
        "from_snapshot": not (left.raw_yaml and right.raw_yaml),
        "same": yaml_left == yaml_right,
    }
    return render(request, "runs/compare_config.html", context)


@dataclass(frozen=True)
class FilesCompared:
    """Every file of two runs' snapshots: those that differ, with their diffs (in path order),
    and those that are identical."""

    left: StoredSnapshot
    right: StoredSnapshot
    diffs: list[FileDiff]
    identical: tuple[str, ...]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("changed", "added", "removed"), 0)
        for diff in self.diffs:
            counts[diff.status] += 1
        return counts


def files_compared(
    left: tuple[int, StoredSnapshot],
    right: tuple[int, StoredSnapshot],
    *,
    full: str = "",
    contents: bool = True,
) -> FilesCompared:
    """Two runs' snapshots (run id, snapshot) compared: their manifests say which files differ,
    and only those small enough to diff are read (one query) and diffed; ``full``: the path
    whose diff is shown whole; ``contents`` False (not staff): no file is read, each differing
    file says so."""
    (left_id, old), (right_id, new) = left, right
    paths = snapshot_diff(old.as_snapshot(), new.as_snapshot())
    before = {entry.path: entry for entry in old.files}
    after = {entry.path: entry for entry in new.files}
    differ = sorted([*paths.changed, *paths.added, *paths.removed])
    # A file whose mode alone changed need not be read.
    same_bytes = {p for p in paths.changed if before[p].sha256 == after[p].sha256}
    # Decided from the manifests' sizes, so a file too large to diff is never inflated.
    unread = {
        path
        for path in differ
        if path not in same_bytes
        and (not contents or diff_too_large(_size(before, path), _size(after, path)))
    }
    wanted: dict[int, list[SnapshotFile]] = {old.id: [], new.id: []}
    for path in differ:
        if path not in same_bytes | unread:
            wanted[old.id] += [before[path]] if path in before else []
            wanted[new.id] += [after[path]] if path in after else []
    stored = snapshot_contents(wanted=wanted)

    def read(snapshot: StoredSnapshot, files: dict[str, SnapshotFile], path: str) -> bytes | None:
        if path not in files:
            return None
        return b"" if path in same_bytes else stored[(snapshot.id, path)]

    def modes(path: str) -> tuple[int, int]:
        return (
            before[path].mode if path in before else 0o644,
            after[path].mode if path in after else 0o644,
        )

    diffs = [
        file_unread(
            path,
            (_size(before, path), _size(after, path)),
            modes=modes(path),
            note="" if contents else CONTENTS_STAFF_ONLY,
        )
        if path in unread
        else file_diff(
            path,
            read(old, before, path),
            read(new, after, path),
            labels=(f"{path} (run #{left_id})", f"{path} (run #{right_id})"),
            modes=modes(path),
            most_lines=None if path == full else MAX_FILE_DIFF_LINES,
        )
        for path in differ
    ]
    return FilesCompared(old, new, diffs, paths.identical)


def _size(files: dict[str, SnapshotFile], path: str) -> int | None:
    return files[path].size if path in files else None


def _config_text(run: Run) -> str:
    """The agent.yaml the run was launched with; for an imported run (HoloDeck files carry
    only the parsed config), its config snapshot as YAML."""
    if run.raw_yaml:
        return run.raw_yaml
    import yaml

    return yaml.safe_dump(run.config_snapshot or {}, sort_keys=False, allow_unicode=True)


def _config_facts(run: Run) -> dict[str, Any]:
    return {
        "snapshot": run.config_snapshot or {},
        "prompt_version": run.prompt_version or {},
        "git": {
            "commit": run.git_commit,
            "branch": run.git_branch,
            "dirty": run.git_dirty,
            "engine": run.holodeck_version,
        },
    }

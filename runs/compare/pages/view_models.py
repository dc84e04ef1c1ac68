"""The compare page's view models: its headline, one line per measure (pass rate, cases and
turns by outcome, metrics, tokens, time, cost), one cell per run with its delta against the run
it is compared with; with repeats, the significance lines; the column heads and the regressions
and fixes by kind; and its matrix's rows, a cell per run (drawn by
``runs.compare.pages.matrix_html``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.http import urlencode

from runs.compare.reads.comparison import Comparison, Headline
from runs.core.comparison.matrix import BASELINE_ORDER, Change, Row
from runs.core.comparison.query import ComparisonQuery
from runs.core.pricing.prices import Cost, format_cost, format_usd
from runs.core.stats.significance import (
    ScoreResult,
    Significance,
    UnitResult,
)
from runs.core.verdicts.kinds import kind_order
from runs.core.verdicts.numbers import (
    NONE_TEXT,
    format_duration,
    format_points,
    format_rate,
    format_score,
    format_score_change,
    format_thousands,
    ordinal,
)
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.summary import MetricSummary, OutcomeCounts

if TYPE_CHECKING:
    from runs.models import Run


def metric_choices(comparison: Comparison) -> list[tuple[str, str]]:
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
    # Older than the run it is compared with: its changes read forward in time, from it to
    # that run ("fixed" where it failed and that run passes), never as regressions of its own.
    older: bool = False

    @property
    def label(self) -> str:
        return "" if self.against is None else f"vs #{self.against.pk}"


def columns_of(comparison: Comparison) -> list[Column]:
    older = comparison.matrix.backwards
    return [Column(run, comparison.against(run), run.pk in older) for run in comparison.runs]


def against_positions(runs: Sequence[Run], comparison: Comparison) -> list[int | None]:
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
    agreement: str = ""  # on a metric's line: how it agrees with people ("people agree 8/10")


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
    agreements: Mapping[str, str] | None = None,
) -> list[Line]:
    """One line per measure, one cell per run; deltas against the column each run is compared
    with (``against``; by default the first, the baseline). ``repeated``: a run has repeats,
    so cases are counted as the matrix shows them (each once, by its verdict over its
    repetitions), the runs' own counts (every repetition) as "repetitions", and the turns and
    pass rate say they are over repetitions. ``agreements``: per metric, how it agrees with the
    people who reviewed its turns (``runs.compare.reads.compared_rows.metric_agreement_texts``),
    said beside its name."""
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
    lines += _metric_lines(headlines, pairs, agreements or {})
    lines += [
        line("tokens", [h.tokens for h in headlines], format_thousands, "lower"),
        line("agent time", [h.agent_ms for h in headlines], format_duration, "lower"),
        line("judge time", [h.judge_ms or None for h in headlines], format_duration, "lower"),
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
    """The whole run's cost, then the agent's and the judges' (runs.core.pricing.prices): "unknown
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
        elif shown is format_duration:
            delta = ("+" if change > 0 else "−") + format_duration(abs(change))
        elif isinstance(change, float):
            delta = format_score_change(change)
        else:
            delta = f"{change:+d}"
        trend = ""
        if better is not None:
            trend = "better" if (change > 0) == (better == "higher") else "worse"
        cells.append(Cell(run_id, text, delta, trend, metric))
    return Line(label, cells, kind, summary, "", kind_rate)


def _metric_lines(
    headlines: Sequence[Headline], against: Against, agreements: Mapping[str, str]
) -> list[Line]:
    """Per metric (of the selected kinds), its average score and, under it, the turns it
    graded, passed, failed and could not grade: the run's summary, per turn; beside its name,
    how it agrees with people (``agreements``)."""
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
        lines.append(
            Line(line.label, line.cells, kind, metric=name, agreement=agreements.get(name, ""))
        )
    return lines


def _metric_order(key: tuple[str, str]) -> tuple[int, str]:
    kind, name = key
    return kind_order(kind), name


def kind_changes(comparison: Comparison) -> list[tuple[str, list[tuple[int, int]]]]:
    """Per kind, (regressions, fixes) of each compared run (every column but the reference),
    in the columns' order."""
    others = [run.pk for run in comparison.runs if run.pk in comparison.matrix.against]
    return [
        (kind, [counts.get(run_id, (0, 0)) for run_id in others])
        for kind, counts in comparison.matrix.by_kind.items()
    ]


# --- the matrix's rows ------------------------------------------------------------------------


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
    # Against the compared run, over their repetitions (runs.core.stats.significance): the case's
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
    def of(cls, comparison: Comparison, settings: ComparisonQuery) -> CellLinks:
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
        return f"{self.side}&{key_query}" + (f"#turn-{ordinal(turn)}" if turn is not None else "")


def row_view(row: Row, comparison: Comparison, links: CellLinks) -> RowView:
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

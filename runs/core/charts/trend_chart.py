"""The geometry of the SVG trends chart ``templates/runs/trends.html`` draws: the pass rate,
then the turns each run fixed and regressed against the run before it (the churn a flat pass
rate hides), then one small panel of average scores per metric kind. The runs it places, their
texts, drops and changes are ``runs.core.charts.trend_runs``'.

Re-grades are not runs of a commit (their transcripts come from one run, their verdicts from
another agent.yaml): they are kept out of the series (the line, its drops and its change
markers) and drawn as marked points of their own beside the run whose transcripts they grade.

No database and no Django here: every text in the chart comes from a run and is escaped by the
template.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from runs.core.charts.trend_runs import (
    DEFAULT_MARGIN,
    MetricKey,
    RunChurn,
    TrendRun,
    changes,
    drops,
    point_title,
)
from runs.core.verdicts.kinds import kind_order
from runs.core.verdicts.numbers import format_points, format_score

MINUS = "\u2212"

# --- geometry --------------------------------------------------------------------------

# The chart's width in CSS px at its smallest: templates/runs/trends.html never draws it narrower
# (a narrower screen scrolls it sideways), so its 10 px labels are never smaller than 10 px.
WIDTH = 960
LEFT = 44
RIGHT = 20
PANEL_TITLE = 18
PASS_HEIGHT = 220
PANEL_GAP = 18
# A run without a pass rate is drawn as a hollow point in a lane under the pass-rate panel, never
# at 0 %: the lane is this tall, its points this far under the panel.
NO_RATE_LANE = 20
NO_RATE_OFFSET = 11
METRIC_HEIGHT = 96  # each metric kind's panel
CHURN_HEIGHT = 84  # fixes above the zero line, regressions below
CHURN_BAR_MAX = 12.0  # px wide at most
AXIS_LABELS = 24
X_LABEL_WIDTH = 36
# A re-grade's diamond sits this fraction of a step (at most this many px) right of its run's point.
REGRADE_SHIFT = 0.3
REGRADE_SHIFT_MAX = 9.0
REGRADE_SIZE = 4.5  # half the diagonal of its diamond

PASS_COLOUR = "#1d2330"
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#b8860b",
    "#b07aa1",
    "#ff6f91",
    "#9c755f",
    "#17becf",
    "#7f7f7f",
    "#8c564b",
)
DASHES = ("", "6 3", "2 3")


@dataclass(frozen=True)
class ChartPanel:
    title: str
    top: float
    bottom: float
    grid: list[tuple[float, str]]  # (y, label)

    @property
    def title_y(self) -> float:
        return self.top - 6


@dataclass(frozen=True)
class PassPoint:
    run: TrendRun
    x: float
    y: float
    has_rate: bool
    title: str


@dataclass(frozen=True)
class RegradePoint:
    """A re-grade, drawn beside the run whose transcripts it grades, off the line."""

    run: TrendRun
    x: float
    y: float
    has_rate: bool
    title: str

    @property
    def path(self) -> str:
        """An SVG diamond around (x, y): a shape no run of the series has."""
        x, y, r = self.x, self.y, REGRADE_SIZE
        corners = ((x, y - r), (x + r, y), (x, y + r), (x - r, y))
        return "M" + " L".join(f"{round(cx, 1)},{round(cy, 1)}" for cx, cy in corners) + " Z"


@dataclass(frozen=True)
class Marker:
    x: float
    label: str
    title: str


@dataclass(frozen=True)
class Callout:
    run: TrendRun
    previous: TrendRun
    drop: float
    x: float
    point_y: float
    y: float  # of the text
    anchor: str

    @property
    def text(self) -> str:
        return f"{format_points(-self.drop).replace('-', MINUS)} at #{self.run.id}"


@dataclass(frozen=True)
class MetricPoint:
    run: TrendRun
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Series:
    kind: str
    name: str
    colour: str
    dash: str
    segments: list[str]  # SVG polyline "x,y x,y ..." of consecutive points
    points: list[MetricPoint]


@dataclass(frozen=True)
class ChurnBar:
    """One run's fixes (a bar up from the zero line) and regressions (a bar down), and a slot
    over the panel's height for its hover text and link."""

    run: TrendRun
    churn: RunChurn
    x: float  # the bars' left edge
    width: float
    fix_y: float
    fix_height: float
    regression_y: float
    regression_height: float
    slot_top: float
    slot_height: float

    @property
    def title(self) -> str:
        return (
            f"#{self.run.id} against #{self.churn.previous}: "
            f"{self.churn.regressions} turn{'s' if self.churn.regressions != 1 else ''} "
            f"regressed, {self.churn.fixes} fixed"
        )


@dataclass(frozen=True)
class Chart:
    width: int
    height: float
    left: float
    right: float
    axis_x: float  # right edge of the y-axis labels
    panels: list[ChartPanel]
    marker_top: float
    marker_bottom: float
    x_labels: list[tuple[float, str]]
    x_label_y: float
    no_rate_y: float | None  # the lane of the runs without a pass rate (None: every run has one)
    points: list[PassPoint]
    pass_segments: list[str]
    markers: list[Marker]
    callouts: list[Callout]
    series: list[Series]
    radius: float
    regrade_points: list[RegradePoint]
    churn: list[ChurnBar]
    churn_zero: float | None  # the y of the churn panel's zero line (None: no churn panel)


def _polylines(coords: Sequence[tuple[float, float] | None]) -> list[str]:
    """Runs of consecutive points as polyline point lists (a missing value breaks the line)."""
    segments: list[list[tuple[float, float]]] = [[]]
    for coord in coords:
        if coord is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(coord)
    return [" ".join(f"{x},{y}" for x, y in seg) for seg in segments if seg]


def chart(
    runs: Sequence[TrendRun],
    averages: dict[MetricKey, dict[int, float]],
    *,
    margin: float = DEFAULT_MARGIN,
    regrades: Sequence[TrendRun] = (),
    churn: Mapping[int, RunChurn] | None = None,
) -> Chart:
    """The geometry of the pass-rate panel, the churn panel (with ``churn``: run id -> its
    turns regressed and fixed against the run before) and one panel per metric kind that has
    averages, sharing one x position per run. A run without a pass rate breaks the line and has
    a hollow point in a lane of its own under the panel.

    ``runs`` are the series (no re-grade among them); ``regrades`` are drawn as diamonds on the
    pass-rate panel, just right of the run whose transcripts they grade (one left out when that
    run is not in ``runs``), never joined to the line nor counted in its drops or markers."""
    step = (WIDTH - RIGHT - LEFT) / max(len(runs), 1)
    x_of = _x_scale(step)
    rateless = any(run.pass_rate is None for run in (*runs, *regrades))
    no_rate_y = PASS_BOTTOM + NO_RATE_OFFSET if rateless else None
    below = PASS_BOTTOM if no_rate_y is None else PASS_BOTTOM + NO_RATE_LANE
    lower = _lower_panels(runs, averages, churn, x_of, step, below)
    points = [
        PassPoint(
            run, x_of(i), _rate_y(run, no_rate_y), run.pass_rate is not None, point_title(run)
        )
        for i, run in enumerate(runs)
    ]
    markers = [
        Marker(round(x_of(i) - step / 2, 1), label, title) for i, label, title in changes(runs)
    ]
    every = max(1, math.ceil(X_LABEL_WIDTH / step))
    return Chart(
        width=WIDTH,
        height=lower.bottom + AXIS_LABELS,
        left=LEFT,
        right=WIDTH - RIGHT,
        axis_x=LEFT - 6,
        panels=[_pass_panel(), *lower.panels],
        marker_top=PASS_TOP,
        marker_bottom=lower.bottom,
        x_labels=[(x_of(i), f"#{run.id}") for i, run in enumerate(runs) if i % every == 0],
        x_label_y=lower.bottom + 15,
        no_rate_y=no_rate_y,
        points=points,
        pass_segments=_polylines([(p.x, p.y) if p.has_rate else None for p in points]),
        markers=markers,
        callouts=_callouts(runs, points, margin, x_of),
        series=lower.series,
        radius=4.0 if step >= 12 else 2.5,
        regrade_points=_regrade_points(runs, regrades, x_of, step, no_rate_y),
        churn=lower.churn,
        churn_zero=lower.churn_zero,
    )


PASS_TOP = PANEL_TITLE
PASS_BOTTOM = PASS_TOP + PASS_HEIGHT


def _x_scale(step: float) -> Callable[[int], float]:
    """The x of the run at an index: the middle of its slot."""

    def x_of(index: int) -> float:
        return round(LEFT + (index + 0.5) * step, 1)

    return x_of


def _y_of_rate(rate: float) -> float:
    clamped = min(max(rate, 0.0), 100.0)
    return round(PASS_TOP + (1 - clamped / 100) * PASS_HEIGHT, 1)


def _rate_y(run: TrendRun, no_rate_y: float | None) -> float:
    """A run's point on the pass-rate panel, or in the lane under it when it has no rate."""
    if run.pass_rate is not None:
        return _y_of_rate(run.pass_rate)
    return no_rate_y or PASS_BOTTOM


def _pass_panel() -> ChartPanel:
    grid = [(_y_of_rate(v), str(v)) for v in (0, 25, 50, 75, 100)]
    return ChartPanel("Pass rate (%)", PASS_TOP, PASS_BOTTOM, grid)


@dataclass(frozen=True)
class _Lower:
    """The panels under the pass rate: the churn panel and one per metric kind."""

    panels: list[ChartPanel]
    series: list[Series]
    churn: list[ChurnBar]
    churn_zero: float | None
    bottom: float


def _lower_panels(
    runs: Sequence[TrendRun],
    averages: dict[MetricKey, dict[int, float]],
    churn: Mapping[int, RunChurn] | None,
    x_of: Callable[[int], float],
    step: float,
    bottom: float,
) -> _Lower:
    """The churn panel (when there is churn) and the metric panels, from ``bottom`` down."""
    panels: list[ChartPanel] = []
    churn_bars: list[ChurnBar] = []
    churn_zero = None
    if churn:
        top = bottom + PANEL_GAP + PANEL_TITLE
        panel, churn_bars = _churn_panel(runs, churn, top, x_of, step)
        panels.append(panel)
        churn_zero = round(top + CHURN_HEIGHT / 2, 1)
        bottom = panel.bottom
    series: list[Series] = []
    for kind in sorted({kind for kind, _ in averages}, key=kind_order):
        metric_top = bottom + PANEL_GAP + PANEL_TITLE
        metric_bottom = metric_top + METRIC_HEIGHT
        y_of_score = _score_scale(metric_top)
        grid = [(y_of_score(v), f"{v:g}") for v in (0, 0.5, 1)]
        title = f"{kind} metrics: average score (0–1)"
        panels.append(ChartPanel(title, metric_top, metric_bottom, grid))
        of_kind = {key: values for key, values in averages.items() if key[0] == kind}
        series += _series(runs, of_kind, x_of, y_of_score, first_colour=len(series))
        bottom = metric_bottom
    return _Lower(panels, series, churn_bars, churn_zero, bottom)


def _regrade_points(
    runs: Sequence[TrendRun],
    regrades: Sequence[TrendRun],
    x_of: Callable[[int], float],
    step: float,
    no_rate_y: float | None,
) -> list[RegradePoint]:
    """The re-grades whose transcripts' run is drawn, each just right of that run."""
    index_of = {run.id: i for i, run in enumerate(runs)}
    beside = min(step * REGRADE_SHIFT, REGRADE_SHIFT_MAX)
    return [
        RegradePoint(
            run,
            round(x_of(index_of[run.transcripts_run]) + beside, 1),
            _rate_y(run, no_rate_y),
            run.pass_rate is not None,
            point_title(run),
        )
        for run in regrades
        if run.transcripts_run in index_of
    ]


def _callouts(
    runs: Sequence[TrendRun],
    points: Sequence[PassPoint],
    margin: float,
    x_of: Callable[[int], float],
) -> list[Callout]:
    """A callout at each drop of the pass rate beyond ``margin``."""
    return [
        Callout(
            runs[i],
            previous,
            drop,
            x_of(i),
            points[i].y,
            _callout_y(points[i].y, PASS_BOTTOM),
            _anchor(x_of(i)),
        )
        for i, previous, drop in drops(runs, margin)
    ]


def _score_scale(top: float) -> Callable[[float], float]:
    def y_of(score: float) -> float:
        clamped = min(max(score, 0.0), 1.0)
        return round(top + (1 - clamped) * METRIC_HEIGHT, 1)

    return y_of


def _churn_panel(
    runs: Sequence[TrendRun],
    churn: Mapping[int, RunChurn],
    top: float,
    x_of: Callable[[int], float],
    step: float,
) -> tuple[ChartPanel, list[ChurnBar]]:
    """The panel of turns fixed (up) and regressed (down) per run, on one scale: the most of
    either at any run reaches the panel's edge."""
    half = CHURN_HEIGHT / 2
    zero = top + half
    most = max([1, *(max(c.regressions, c.fixes) for c in churn.values())])
    width = round(min(step * 0.5, CHURN_BAR_MAX), 1)
    bars = []
    for index, run in enumerate(runs):
        found = churn.get(run.id)
        if found is None:
            continue
        fix, regression = (
            round(count / most * half, 1) for count in (found.fixes, found.regressions)
        )
        bars.append(
            ChurnBar(
                run=run,
                churn=found,
                x=round(x_of(index) - width / 2, 1),
                width=width,
                fix_y=round(zero - fix, 1),
                fix_height=fix,
                regression_y=round(zero, 1),
                regression_height=regression,
                slot_top=top,
                slot_height=CHURN_HEIGHT,
            )
        )
    grid = [
        (round(top, 1), f"+{most}"),
        (round(zero, 1), "0"),
        (round(top + CHURN_HEIGHT, 1), f"{MINUS}{most}"),
    ]
    title = "Turns fixed (up) and regressed (down) against the run before"
    return ChartPanel(title, top, top + CHURN_HEIGHT, grid), bars


def _callout_y(point_y: float, bottom: float) -> float:
    """Below the point, or above it when the point sits on the bottom of the panel."""
    below = point_y + 18
    return below if below <= bottom - 3 else point_y - 11


def _anchor(x: float) -> str:
    if x < LEFT + 60:
        return "start"
    if x > WIDTH - RIGHT - 60:
        return "end"
    return "middle"


def _series(
    runs: Sequence[TrendRun],
    averages: dict[MetricKey, dict[int, float]],
    x_of: Callable[[int], float],
    y_of: Callable[[float], float],
    *,
    first_colour: int = 0,
) -> list[Series]:
    keys = sorted(averages, key=lambda key: (kind_order(key[0]), key[1]))
    drawn: list[Series] = []
    for n, (kind, name) in enumerate(keys, start=first_colour):
        by_run = averages[(kind, name)]
        coords: list[tuple[float, float] | None] = []
        points: list[MetricPoint] = []
        for i, run in enumerate(runs):
            average = by_run.get(run.id)
            if average is None:
                coords.append(None)
                continue
            x, y = x_of(i), y_of(average)
            coords.append((x, y))
            points.append(
                MetricPoint(run, x, y, f"#{run.id} · {name} ({kind}): {format_score(average)}")
            )
        colour = PALETTE[n % len(PALETTE)]
        dash = DASHES[(n // len(PALETTE)) % len(DASHES)]
        drawn.append(Series(kind, name, colour, dash, _polylines(coords), points))
    return drawn

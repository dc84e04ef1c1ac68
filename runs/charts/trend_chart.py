"""The trends chart from plain data: runs in commit order, pass-rate drops, prompt and model
changes, and the geometry of the SVG chart ``templates/runs/trends.html`` draws: the pass rate,
then the turns each run fixed and regressed against the run before it (the churn a flat pass
rate hides), then one small panel of average scores per metric kind.

Re-grades are not runs of a commit (their transcripts come from one run, their verdicts from
another agent.yaml): they are kept out of the series (the line, its drops and its change
markers) and drawn as marked points of their own beside the run whose transcripts they grade.

No database and no Django here: the reads (``runs.selectors.trends``) hand over ``TrendRun``
values and metric averages; every text in the chart comes from a run and is escaped by the
template.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from runs.verdicts.kinds import kind_order
from runs.verdicts.numbers import format_points, format_rate, format_score
from runs.verdicts.outcomes import MAIN_OUTCOMES
from runs.verdicts.summary import OutcomeCounts

DEFAULT_MARGIN = 10.0  # percentage points

MINUS = "\u2212"


@dataclass(frozen=True)
class TrendRun:
    """One finished run as the trends page shows it (``created_at`` in the time zone shown):
    its pass rate and case counts are those of its stored summary (``pass_rate`` None: no case
    was graded, and the run has no point on the pass-rate line)."""

    id: int
    status: str
    agent_name: str
    commit: str
    branch: str
    dirty: bool
    prompt_version: str
    model: str
    provider: str
    pass_rate: float | None
    created_at: datetime
    url: str = ""  # its run page, set by the view for the runs it shows
    cases: OutcomeCounts | None = None  # of its stored summary (None: stored without one)
    # A re-grade: the run it re-grades, the run whose transcripts it grades (where it is drawn),
    # and the agent.yaml it was graded with (its ref, or "the working tree", and commit).
    regrade_of: int | None = None
    transcripts_run: int | None = None
    graded_with: str = ""
    grading_commit: str = ""
    # "partial: 3 of 8 cases, filter 'cash'" when it ran a selection of its agent's cases.
    partial: str = ""
    subject: str = ""  # its commit's subject (a re-grade's: its transcripts' commit's)

    @property
    def short_commit(self) -> str:
        return self.commit[:8]

    @property
    def is_regrade(self) -> bool:
        return self.regrade_of is not None

    @property
    def regrade_label(self) -> str:
        """``"re-grade of #2 with loose"`` ("" for a run that is not a re-grade)."""
        if self.regrade_of is None:
            return ""
        return f"re-grade of #{self.regrade_of} with {self.graded_with}"


MetricKey = tuple[str, str]  # (kind, metric name)


# --- ordering --------------------------------------------------------------------------------


def split_regrades(runs: Sequence[TrendRun]) -> tuple[list[TrendRun], list[TrendRun]]:
    """(the runs of the series, the re-grades), each in the order given."""
    series = [run for run in runs if not run.is_regrade]
    return series, [run for run in runs if run.is_regrade]


def regrades_placed(
    regrades: Sequence[TrendRun], shown: Sequence[TrendRun]
) -> tuple[list[TrendRun], list[TrendRun]]:
    """(the re-grades whose transcripts' run is among ``shown``, in that run's order then by
    date; the others, which have no place on the chart)."""
    position = {run.id: index for index, run in enumerate(shown)}
    placed = [run for run in regrades if run.transcripts_run in position]
    placed.sort(key=lambda run: (position[run.transcripts_run or 0], run.created_at, run.id))
    return placed, [run for run in regrades if run.transcripts_run not in position]


# --- chart geometry --------------------------------------------------------------------------

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
LABEL_CHARS = 24
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
class Panel:
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
class RunChurn:
    """A run's turns against the run before it in the series (``previous``, which may be off
    the chart when only the last runs are drawn): how many regressed and were fixed."""

    previous: int
    regressions: int
    fixes: int


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
    panels: list[Panel]
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


def model_label(run: TrendRun) -> str:
    return run.model or run.provider


def local_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def point_title(run: TrendRun) -> str:
    commit = run.short_commit or "no commit"
    if run.dirty:
        commit += " (dirty)"
    model = run.model or "–"
    if run.provider and run.model:
        model += f" ({run.provider})"
    rate = "no pass rate" if run.pass_rate is None else f"pass rate {format_rate(run.pass_rate)}"
    lines = [f"Run #{run.id} · {run.status} · {rate}"]
    if run.cases is not None:
        lines.append(cases_line(run.cases))
    if run.partial:
        lines.append(run.partial)
    if run.is_regrade:
        graded = run.grading_commit[:8] or "no commit"
        lines[0] = f"Re-grade #{run.id} of #{run.regrade_of} · {run.status} · {rate}"
        lines.append(f"graded with {run.graded_with} (commit {graded})")
        commit = f"{commit} (transcripts of #{run.transcripts_run})"
    return "\n".join(
        [
            *lines,
            f"commit {commit} on {run.branch or 'no branch'}",
            *([run.subject] if run.subject else []),
            f"prompt {run.prompt_version or '–'}",
            f"model {model}",
            local_time(run.created_at),
        ]
    )


def cases_line(cases: OutcomeCounts) -> str:
    """``"cases: 1 passed · 2 failed · 1 not graded"``: the counts that are not zero."""
    parts = [
        f"{getattr(cases, outcome.value)} {outcome.label}"
        for outcome in MAIN_OUTCOMES
        if getattr(cases, outcome.value)
    ]
    return f"cases: {' · '.join(parts) or 'none graded'}"


def drops(runs: Sequence[TrendRun], margin: float) -> list[tuple[int, TrendRun, float]]:
    """(index, previous run, drop in points) where the pass rate fell by more than ``margin``
    from the previous run that has one."""
    found: list[tuple[int, TrendRun, float]] = []
    previous: TrendRun | None = None
    for index, run in enumerate(runs):
        if run.pass_rate is None:
            continue
        if previous is not None and previous.pass_rate is not None:
            drop = previous.pass_rate - run.pass_rate
            if drop > margin:
                found.append((index, previous, drop))
        previous = run
    return found


def changes(runs: Sequence[TrendRun]) -> list[tuple[int, str, str]]:
    """(index, label, title) where the prompt version or the model differs from the run before."""
    found: list[tuple[int, str, str]] = []
    for index in range(1, len(runs)):
        before, run = runs[index - 1], runs[index]
        labels: list[str] = []
        lines: list[str] = []
        if run.prompt_version != before.prompt_version:
            labels.append(run.prompt_version or "no prompt version")
            lines.append(
                f"prompt {before.prompt_version or '–'} → {run.prompt_version or '–'} at #{run.id}"
            )
        if (run.provider, run.model) != (before.provider, before.model):
            labels.append(model_label(run) or "no model")
            lines.append(
                f"model {model_label(before) or '–'} → {model_label(run) or '–'} at #{run.id}"
            )
        if labels:
            found.append((index, _truncate(" · ".join(labels)), "\n".join(lines)))
    return found


def _truncate(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    count = max(len(runs), 1)
    right_edge = WIDTH - RIGHT
    step = (right_edge - LEFT) / count

    def x_of(index: int) -> float:
        return round(LEFT + (index + 0.5) * step, 1)

    pass_top = PANEL_TITLE
    pass_bottom = pass_top + PASS_HEIGHT

    def y_of_rate(rate: float) -> float:
        clamped = min(max(rate, 0.0), 100.0)
        return round(pass_top + (1 - clamped / 100) * PASS_HEIGHT, 1)

    panels = [
        Panel(
            "Pass rate (%)",
            pass_top,
            pass_bottom,
            [(y_of_rate(v), str(v)) for v in (0, 25, 50, 75, 100)],
        )
    ]
    rateless = any(run.pass_rate is None for run in (*runs, *regrades))
    no_rate_y = pass_bottom + NO_RATE_OFFSET if rateless else None
    bottom: float = pass_bottom if no_rate_y is None else pass_bottom + NO_RATE_LANE
    churn_bars: list[ChurnBar] = []
    churn_zero = None
    if churn:
        top = bottom + PANEL_GAP + PANEL_TITLE
        panel, churn_bars = _churn_panel(runs, churn, top, x_of, step)
        panels.append(panel)
        churn_zero = round(top + CHURN_HEIGHT / 2, 1)
        bottom = panel.bottom
    series: list[Series] = []
    kinds = sorted({kind for kind, _ in averages}, key=kind_order)
    for kind in kinds:
        metric_top = bottom + PANEL_GAP + PANEL_TITLE
        metric_bottom = metric_top + METRIC_HEIGHT
        y_of_score = _score_scale(metric_top)
        panels.append(
            Panel(
                f"{kind} metrics: average score (0–1)",
                metric_top,
                metric_bottom,
                [(y_of_score(v), f"{v:g}") for v in (0, 0.5, 1)],
            )
        )
        of_kind = {key: values for key, values in averages.items() if key[0] == kind}
        series += _series(runs, of_kind, x_of, y_of_score, first_colour=len(series))
        bottom = metric_bottom

    points = [
        PassPoint(
            run,
            x_of(i),
            y_of_rate(run.pass_rate) if run.pass_rate is not None else no_rate_y or pass_bottom,
            run.pass_rate is not None,
            point_title(run),
        )
        for i, run in enumerate(runs)
    ]
    pass_segments = _polylines([(p.x, p.y) if p.has_rate else None for p in points])
    index_of = {run.id: i for i, run in enumerate(runs)}
    beside = min(step * REGRADE_SHIFT, REGRADE_SHIFT_MAX)
    regrade_points = [
        RegradePoint(
            run,
            round(x_of(index_of[run.transcripts_run]) + beside, 1),
            y_of_rate(run.pass_rate) if run.pass_rate is not None else no_rate_y or pass_bottom,
            run.pass_rate is not None,
            point_title(run),
        )
        for run in regrades
        if run.transcripts_run in index_of
    ]
    markers = [
        Marker(round(x_of(i) - step / 2, 1), label, title) for i, label, title in changes(runs)
    ]
    callouts = [
        Callout(
            runs[i],
            previous,
            drop,
            x_of(i),
            points[i].y,
            _callout_y(points[i].y, pass_bottom),
            _anchor(x_of(i)),
        )
        for i, previous, drop in drops(runs, margin)
    ]
    every = max(1, math.ceil(X_LABEL_WIDTH / step))
    x_labels = [(x_of(i), f"#{run.id}") for i, run in enumerate(runs) if i % every == 0]
    return Chart(
        width=WIDTH,
        height=bottom + AXIS_LABELS,
        left=LEFT,
        right=right_edge,
        axis_x=LEFT - 6,
        panels=panels,
        marker_top=pass_top,
        marker_bottom=bottom,
        x_labels=x_labels,
        x_label_y=bottom + 15,
        no_rate_y=no_rate_y,
        points=points,
        pass_segments=pass_segments,
        markers=markers,
        callouts=callouts,
        series=series,
        radius=4.0 if step >= 12 else 2.5,
        regrade_points=regrade_points,
        churn=churn_bars,
        churn_zero=churn_zero,
    )


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
) -> tuple[Panel, list[ChurnBar]]:
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
    return Panel(title, top, top + CHURN_HEIGHT, grid), bars


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

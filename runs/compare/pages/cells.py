"""The compare page's matrix: a row per case, a cell per run (its verdict, its turns' dots, the
chosen metric's delta, its repetitions and significance) and the row's changes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from django.utils.html import escape
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

from runs.compare.reads.comparison import Comparison
from runs.core.comparison.matrix import BASELINE_ORDER, NOISE, Change, Row
from runs.core.comparison.query import ComparisonQuery
from runs.core.stats.significance import (
    NO_EVIDENCE,
    SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_WORSE,
    ScoreResult,
    UnitResult,
)
from runs.core.verdicts.numbers import format_score, format_score_delta, ordinal, turn_text
from runs.core.verdicts.outcomes import Outcome

if TYPE_CHECKING:
    pass


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


def matrix_html(rows: list[RowView]) -> SafeString:
    """The matrix's rows, rendered here rather than in the template: a page holds a hundred
    rows of up to a dozen cells of up to a handful of turns each, and the template engine (or
    format_html, value by value) would spend most of the page's time on them. Every value that
    is not one of ours (a case key, a metric name, a link holding them) is escaped.

    Measured (issue 29): a page of 100 rows × 8 runs × 5 turns takes 3.1 ms here and 108 ms
    (34×) as a ``{% partialdef %}`` of the same markup, where the whole 8-run page
    (benchmarks/compare_bench.py) takes about 240 ms of its 300 ms target."""
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
    f'<span class="chip chip-warn unstable" title="{UNSTABLE_HINT}">changed back and forth</span>'
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

"""The compare page's matrix drawn as HTML: a row per case, a cell per run (its verdict, its
turns' dots, the chosen metric's delta, its repetitions and significance) and the row's
changes, from the rows' view models (``runs.compare.pages.view_models``); drawn here rather
than in a template, which would spend most of the page's time on them."""

from __future__ import annotations

from functools import cache

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from runs.compare.pages.view_models import UNSTABLE_HINT, CellView, RowView
from runs.core.comparison.matrix import NOISE, Change, Row
from runs.core.stats.significance import (
    NO_EVIDENCE,
    SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_WORSE,
)
from runs.core.verdicts.numbers import format_score, format_score_delta, turn_text
from runs.core.verdicts.outcomes import Outcome


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

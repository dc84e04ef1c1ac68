"""Compare runs: headline deltas, the case x turn matrix, per-turn side-by-side, config diff.

Every part of the compare page is filtered by metric kind (``?kinds=code,tools``), and every
setting is in the URL, so a filtered compare can be shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import escape
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from runs.report.compare import Change, Row, change_of, select_rows, sort_rows, verdict
from runs.report.kinds import KINDS, TOOLS_KIND, kind_order
from runs.report.numbers import (
    NONE_TEXT,
    format_points,
    format_rate,
    format_score,
    format_score_change,
    turn_text,
)
from runs.report.outcomes import Outcome
from runs.report.prices import Cost, format_cost, format_usd
from runs.report.summary import MetricSummary
from runs.selectors.compare import (
    MAX_RUNS,
    Comparison,
    Headline,
    NoBaseline,
    RunsMissing,
    cases_by_key,
    comparison_for,
    runs_for_compare,
    runs_for_config,
)
from runs.selectors.snapshots import StoredSnapshot, snapshot_contents, stored_snapshot
from runs.snapshots import SnapshotFile, snapshot_diff
from runs.templatetags.dashboard import duration, thousands
from runs.web.diffs import (
    CONTENTS_STAFF_ONLY,
    MAX_FILE_DIFF_LINES,
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
    int_list_param,
    int_param,
    params_or_errors,
    shown_value,
    text_param,
)

if TYPE_CHECKING:
    from runs.models import MetricResult, Run, TurnResult

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
SHOWS = ("all", "regressions", "fixes", "flaky", "changed", "partial")
SORTS = ("case", "regressions", "name")


# --- the compare page -----------------------------------------------------------------------


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    # A refused value shows the page's form again with the message at its field (a 400).
    params, errors = params_or_errors(request, _compare_params)
    run_ids, kinds, show, sort, chosen = params
    status = 400 if errors else 200
    if not run_ids:
        context = {
            "empty": True,
            "max_runs": MAX_RUNS,
            "errors": errors,
            "bad_runs": shown_value(request, "runs", errors),
        }
        return render(request, "runs/compare.html", context, status=status)
    try:
        baseline, comparison = comparison_for(run_ids, chosen=chosen, kinds=kinds)
    except RunsMissing as exc:
        raise Http404(str(exc)) from None
    except NoBaseline as exc:
        context = {"alone": exc.run, "later": exc.later, "max_runs": MAX_RUNS}
        return render(request, "runs/compare.html", context)
    shown = comparison.runs
    rows = sort_rows(select_rows(comparison.matrix.rows, show), sort)
    page = Paginator(rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    state = {
        "runs": ",".join(str(run.pk) for run in shown),
        "baseline": str(chosen) if chosen is not None else "",
        "kinds": ",".join(kinds),
        "show": show,
        "sort": sort,
    }
    context = {
        "comparison": comparison,
        "baseline": baseline,
        "chosen": chosen is not None and baseline.rule == "chosen by you",
        "runs": shown,
        "others": shown[1:],
        "kinds": kinds,
        "all_kinds": KINDS,
        "show": show,
        "shows": SHOWS,
        "sort": sort,
        "sorts": SORTS,
        "lines": headline_lines(comparison.headlines, kinds),
        "legend": LEGEND,
        "kind_changes": _kind_changes(comparison),
        "page": page,
        "rows": (views := [_row_view(row, comparison, state) for row in page.object_list]),
        "matrix_html": matrix_html(views),
        "state": state,
        "query": urlencode({k: v for k, v in state.items() if v}),
        "errors": errors,
    }
    return render(request, "runs/compare.html", context, status=status)


CompareParams = tuple[list[int], list[str], str, str, int | None]


def _compare_params(request: Query) -> CompareParams:
    """(run ids, kinds, show, sort, the baseline chosen) of the compare page."""
    return (
        int_list_param(request, "runs", most=MAX_RUNS),
        choice_list_param(request, "kinds", KINDS),
        choice_param(request, "show", SHOWS) or "all",
        choice_param(request, "sort", SORTS) or "case",
        int_param(request, "baseline"),
    )


# --- headline deltas ------------------------------------------------------------------------
# The headline is each run's own summary (what its run page shows: case and turn counts, the
# pass rate, per metric the turns it graded), whatever the kind filter; each number is marked
# with ``data-summary`` (and ``data-metric``, ``data-run``) so a test can read it back.


@dataclass(frozen=True)
class Cell:
    run_id: int
    text: str
    delta: str = ""
    trend: str = ""  # "better", "worse", "" (same, not comparable, or the baseline)
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
# (label, field of OutcomeCounts, which way is better; None: never coloured)
COUNT_LINES: tuple[tuple[str, str, str | None], ...] = (
    ("passed", Outcome.PASSED.value, "higher"),
    ("failed", Outcome.FAILED.value, "lower"),
    (Outcome.ERROR.label, Outcome.ERROR.value, "lower"),
    # "Not graded" is neither a pass nor a failure: shown, never coloured.
    (Outcome.NOT_GRADED.label, Outcome.NOT_GRADED.value, None),
)
ALWAYS_SHOWN = frozenset({Outcome.PASSED.value, Outcome.FAILED.value})


def headline_lines(headlines: Sequence[Headline], kinds: Sequence[str] = ()) -> list[Line]:
    """One line per measure, one cell per run; deltas against the first run (the baseline)."""
    ids = [h.run.pk for h in headlines]
    rates = [h.pass_rate for h in headlines]
    lines = [
        _line("pass rate", ids, rates, format_rate, "higher", points=True, summary="pass_rate")
    ]
    if kinds:
        lines.append(
            _line(
                f"pass rate, {' + '.join(kinds)} only",
                ids,
                [h.kind_pass_rate for h in headlines],
                format_rate,
                "higher",
                points=True,
                kind_rate=True,
            )
        )
    for scope, counts_of in (
        ("cases", lambda h: h.summary.cases),
        ("turns", lambda h: h.summary.turns),
    ):
        lines.append(_line(scope, ids, [counts_of(h).total for h in headlines], str, None))
        for label, name, better in COUNT_LINES:
            values = [getattr(counts_of(h), name) for h in headlines]
            if name in ALWAYS_SHOWN or any(values):
                lines.append(
                    _line(f"{scope} {label}", ids, values, str, better, summary=f"{scope}.{name}")
                )
    tools = [h.tool_pass_rate for h in headlines]
    if any(rate is not None for rate in tools):
        lines.append(
            _line("tool assertions (turns)", ids, tools, format_rate, "higher", points=True)
        )
    lines += _metric_lines(headlines)
    lines += [
        _line("tokens", ids, [h.tokens for h in headlines], thousands, "lower"),
        _line("agent time", ids, [h.agent_ms for h in headlines], duration, "lower"),
        _line("judge time", ids, [h.judge_ms or None for h in headlines], duration, "lower"),
    ]
    lines += _cost_lines(headlines)
    return lines


def _cost_lines(headlines: Sequence[Headline]) -> list[Line]:
    """The whole run's cost, then the agent's and the judges' (runs.report.prices): "unknown
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
        lines.append(
            Line(
                label,
                [_cost_cell(h.run.pk, c, costs[0]) for h, c in zip(headlines, costs, strict=True)],
            )
        )
    return lines


def _cost_cell(run_id: int, cost: Cost, base: Cost) -> Cell:
    text = format_cost(cost)
    if cost is base or not (cost.known and base.known) or cost.usd == base.usd:
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
    points: bool = False,
    kind: str = "",
    summary: str = "",
    kind_rate: bool = False,
    metrics: list[MetricSummary | None] | None = None,
) -> Line:
    base = values[0]
    cells = []
    for position, (run_id, value) in enumerate(zip(run_ids, values, strict=True)):
        metric = metrics[position] if metrics else None
        text = shown(value) if value is not None else NONE_TEXT
        if position == 0 or value is None or base is None or value == base:
            same = "" if position == 0 or value is None or base is None else "±0"
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


def _metric_lines(headlines: Sequence[Headline]) -> list[Line]:
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
        line = _line(name, ids, averages, format_score, "higher", kind=kind, metrics=metrics)
        lines.append(Line(line.label, line.cells, kind, metric=name))
    return lines


def _metric_order(key: tuple[str, str]) -> tuple[int, str]:
    kind, name = key
    return kind_order(kind), name


def _kind_changes(comparison: Comparison) -> list[tuple[str, list[tuple[int, int]]]]:
    """Per kind, (regressions, fixes) of each non-baseline run, in the runs' order."""
    others = [run.pk for run in comparison.runs[1:]]
    return [
        (kind, [counts.get(run_id, (0, 0)) for run_id in others])
        for kind, counts in comparison.matrix.by_kind.items()
    ]


# --- the matrix -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnMark:
    index: int
    verdict: Outcome
    change: Change | None  # against the baseline's same turn


@dataclass(frozen=True)
class CellView:
    run_id: int
    verdict: Outcome
    case_id: int | None
    turns: list[TurnMark]
    link: str
    is_baseline: bool


@dataclass(frozen=True)
class RowView:
    row: Row
    cells: list[CellView]


def _row_view(row: Row, comparison: Comparison, state: dict[str, str]) -> RowView:
    base_id = comparison.baseline.pk
    key_query = urlencode({"key": row.key})
    cells = []
    for run in comparison.runs:
        marks = [
            TurnMark(
                index,
                line[run.pk],
                None
                if run.pk == base_id
                else change_of(line.get(base_id, Outcome.ABSENT), line[run.pk]),
            )
            for index, line in enumerate(row.turns)
        ]
        case_id = row.case_ids.get(run.pk)
        cells.append(
            CellView(
                run_id=run.pk,
                verdict=row.cells[run.pk],
                case_id=case_id,
                turns=marks,
                link=_cell_link(key_query, run.pk, base_id, case_id, state),
                is_baseline=run.pk == base_id,
            )
        )
    return RowView(row, cells)


def matrix_html(rows: list[RowView]) -> SafeString:
    """The matrix's rows, rendered here rather than in the template: a page holds a hundred
    rows of up to a dozen cells of up to a handful of turns each, and the template engine (or
    format_html, value by value) would spend most of the page's time on them. Every value that
    is not one of ours (a case key, a link holding it) is escaped."""
    return mark_safe("\n".join(_row_html(view) for view in rows))


def _row_html(view: RowView) -> str:
    row = view.row
    classes = " ".join(
        name for name, on in (("has-regression", row.regressions), ("partial", row.partial)) if on
    )
    changes = []
    if row.regressions:
        changes.append(f'<span class="worse">{row.regressions} regressed</span>')
    if row.fixes:
        changes.append(f'<span class="better">{row.fixes} fixed</span>')
    if row.flaky:
        changes.append('<span class="chip chip-notgraded">flaky</span>')
    if row.partial:
        changes.append('<span class="chip chip-muted">not in every run</span>')
    key = escape(row.key)
    cells = "".join(_cell_html(cell) for cell in view.cells)
    return (
        f'<tr class="matrix-row {classes}" data-key="{key}"><th scope="row" class="case-key">'
        f'{key}</th>{cells}<td class="small">{" ".join(changes)}</td></tr>'
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
    if len(cell.turns) > 1:
        total = len(cell.turns)
        marks = "".join(
            _dot_html(mark.index, total, mark.verdict, mark.change) for mark in cell.turns
        )
        dots = f'<span class="turn-dots">{marks}</span>'
    return f'<td class="cell">{chip}{dots}</td>'


@cache
def _chip_html(verdict: Outcome) -> str:
    return f'<span class="cv cv-{verdict.value}">{verdict.label}</span>'


@cache
def _dot_html(index: int, total: int, verdict: Outcome, change: Change | None) -> str:
    """A turn's dot (a few distinct ones on a page: each drawn once)."""
    title = f"{turn_text(index, total)}: {verdict.label}" + (f" ({change})" if change else "")
    return f'<span class="dot cv-{verdict.value} {change or ""}" title="{title}"></span>'


def _cell_link(
    key_query: str, run_id: int, base_id: int, case_id: int | None, state: dict[str, str]
) -> str:
    """The baseline's case page, or the case in the baseline and this run side by side
    (``key_query``: the row's ``key=...``, encoded once for its cells)."""
    if case_id is None:
        return ""
    if run_id == base_id:
        return f"/runs/{run_id}/cases/{case_id}/"
    query = urlencode({"runs": f"{base_id},{run_id}"}) + f"&{key_query}"
    if state["kinds"]:
        query += "&" + urlencode({"kinds": state["kinds"]})
    return f"/compare/case/?{query}"


# --- one case, two runs, turn by turn -------------------------------------------------------


@login_required
@require_GET
def compare_case(request: HttpRequest) -> HttpResponse:
    left, right = _two_runs(request)
    key = text_param(request, "key", max_length=600)
    if not key:
        raise BadRequest("?key= names the case to compare (its name, or #index)")
    kinds = choice_list_param(request, "kinds", KINDS)
    cases = {case.run_id: case for case in cases_by_key([left.pk, right.pk], key)}
    if not cases:
        raise Http404(f"neither run has a case {key!r}")
    before, after = cases.get(left.pk), cases.get(right.pk)
    turns_before = list(before.turns.all()) if before else []
    turns_after = list(after.turns.all()) if after else []
    pairs = [
        _turn_pair(index, turns_before, turns_after, kinds)
        for index in range(max(len(turns_before), len(turns_after)))
    ]
    context = {
        "left": left,
        "right": right,
        "key": key,
        "before": before,
        "after": after,
        "pairs": pairs,
        "turn_total": len(pairs),
        "kinds": kinds,
        "back": f"/compare/?runs={left.pk},{right.pk}&baseline={left.pk}",
    }
    return render(request, "runs/compare_case.html", context)


def _two_runs(request: HttpRequest) -> tuple[Run, Run]:
    run_ids = int_list_param(request, "runs", most=2)
    if len(run_ids) != 2:
        raise BadRequest("?runs= takes two run ids: the baseline, then the run to compare")
    runs = runs_for_compare(run_ids)
    if len(runs) != 2:
        raise Http404("no such run")
    return runs[0], runs[1]


@dataclass(frozen=True)
class MetricPair:
    name: str
    kind: str
    before: MetricResult | None
    after: MetricResult | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        if self.before.score is None or self.after.score is None:
            return None
        return self.after.score - self.before.score


@dataclass(frozen=True)
class TurnPair:
    index: int
    before: TurnResult | None
    after: TurnResult | None
    response_diff: Any
    calls: list[Any]
    metrics: list[MetricPair]
    change: Change | None
    show_tools: bool

    @property
    def changed(self) -> bool:
        """Anything to look at: a verdict, the response, a call, a metric differs."""
        if self.change or self.before is None or self.after is None:
            return True
        if self.before.response != self.after.response:
            return True
        if self.before.outcome != self.after.outcome:
            return True
        if any(not call.same for call in self.calls):
            return True
        return any(
            m.before is None
            or m.after is None
            or (m.before.outcome, m.before.score) != (m.after.outcome, m.after.score)
            for m in self.metrics
        )


def _turn_pair(
    index: int, before: list[TurnResult], after: list[TurnResult], kinds: list[str]
) -> TurnPair:
    a = before[index] if index < len(before) else None
    b = after[index] if index < len(after) else None
    metrics = _metric_pairs(a, b)
    if kinds:
        metrics = [pair for pair in metrics if pair.kind in kinds]
    return TurnPair(
        index=index,
        before=a,
        after=b,
        response_diff=word_diff(a.response if a else "", b.response if b else ""),
        calls=tool_call_diff(a.tool_invocations if a else [], b.tool_invocations if b else []),
        metrics=metrics,
        change=change_of(_turn_verdict(a, kinds), _turn_verdict(b, kinds)),
        show_tools=not kinds or TOOLS_KIND in kinds,
    )


def _turn_verdict(turn: TurnResult | None, kinds: list[str]) -> Outcome:
    if turn is None:
        return Outcome.ABSENT
    return verdict(turn.outcome, turn.kind_outcomes or {}, frozenset(kinds))


def _metric_pairs(a: TurnResult | None, b: TurnResult | None) -> list[MetricPair]:
    before = {m.metric_name: m for m in a.metrics.all()} if a else {}
    after = {m.metric_name: m for m in b.metrics.all()} if b else {}
    names = list(before) + [name for name in after if name not in before]
    return [
        MetricPair(name, (before.get(name) or after[name]).kind, before.get(name), after.get(name))
        for name in names
    ]


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

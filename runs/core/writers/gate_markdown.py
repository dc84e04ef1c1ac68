"""The CI gate's verdict as plain data, and its Markdown summary for a pull-request comment.

``runs.compare.gate`` finds the runs, compares them and fills a ``GateResult``; this module
only writes it out. No database and no Django here: the runs come as ``GateRun`` values, each
with its stored summary (``RunSummary``), so the summary's case and turn counts, pass rate and
per-turn metric counts are the numbers of the run page. Numbers read as
``runs.core.verdicts.numbers`` writes them everywhere ("–" for a run with no pass rate, never 0 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from runs.core.pricing.prices import Cost, SplitCost, format_cost, format_usd
from runs.core.verdicts.numbers import (
    NONE_TEXT,
    format_points,
    format_rate,
    format_score,
    format_score_change,
    pass_rate_of,
    turn_text,
)
from runs.core.verdicts.outcomes import MAIN_OUTCOMES
from runs.core.verdicts.summary import MetricSummary, OutcomeCounts, RunSummary


@dataclass(frozen=True)
class GateOptions:
    max_regressions: int = 0
    min_pass_rate: float | None = None  # 0–100
    kinds: tuple[str, ...] = ()  # empty: every kind
    max_metric_drop: dict[str, float] = field(default_factory=dict)  # metric name -> limit
    base_url: str = ""  # the dashboard's address for links; "": paths (/runs/2/)
    # Fail on significant regressions only (runs.core.stats.significance), at this alpha.
    significant_only: bool = False
    alpha: float = 0.05
    # Triage categories (by name) whose failures leave the verdict: the regressed turns people
    # triaged into them are not counted, nor their cases in the pass rate; listed apart.
    ignore_triaged: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateSignificance:
    """What the samples say (``runs.selectors.significance``): the turns that changed
    significantly and those whose change is within noise, and the pass-rate difference with its
    confidence interval (in points; None when it cannot be computed)."""

    worse: int
    better: int
    noise: int
    text: str
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    before_runs: tuple[int, ...]
    after_runs: tuple[int, ...]
    # The significantly worse turns by case (``worse`` turns in all), and the ``noise`` turns
    # whose pass rate changed without significance, in the compare page's case order.
    regressed: tuple[RegressedCase, ...] = ()
    noise_turns: tuple[NoisyTurn, ...] = ()


@dataclass(frozen=True)
class RegressedCase:
    key: str
    turns: list[int]  # stored turn indexes (from 0); the Markdown numbers them from 1
    url: str  # the side-by-side page of the case


@dataclass(frozen=True)
class NoisyTurn:
    """A turn whose pass rate over the repetitions changed, but not significantly."""

    key: str  # its case's
    turn: int  # the stored turn index (from 0)
    passed_before: int  # of n_before graded outcomes on the baseline's side
    n_before: int
    passed_after: int  # of n_after on the run's side
    n_after: int
    url: str  # the side-by-side page of the case


@dataclass(frozen=True)
class TriagedTurn:
    """A regressed turn people triaged into an ignored category: left out of the verdict,
    listed under its own heading."""

    key: str  # its case's
    turn: int  # the stored turn index (from 0)
    category: str
    by: str  # who triaged it ("" when unknown)
    note: str
    carried_from_run: int | None  # the earlier run it was reviewed on, carried here (known)
    url: str  # the side-by-side page of the case


@dataclass(frozen=True)
class MetricChange:
    name: str
    kind: str
    before: float | None
    after: float | None
    limit: float | None  # the allowed drop, when one was set
    turns: MetricSummary | None = None  # the run's per-turn counts of it (None: it has none)

    @property
    def drop(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.before - self.after

    @property
    def over_limit(self) -> bool:
        if self.limit is None or self.before is None:
            return False
        return self.after is None or (self.drop or 0.0) > self.limit + 1e-9


@dataclass(frozen=True)
class GateRun:
    """What the summary says about a run (the gated run or its baseline)."""

    id: int
    agent_name: str
    status: str
    git_commit: str
    git_branch: str
    summary: RunSummary
    # What it cost (runs.core.pricing.prices), agent and judge apart; None with cost_error when the
    # price file cannot be read, None alone when not priced.
    cost: SplitCost | None = None
    cost_error: str | None = None


@dataclass
class GateResult:
    passed: bool
    reasons: list[str]  # why it failed (empty when it passed)
    run: GateRun
    baseline: GateRun
    baseline_rule: str
    regressions: int  # regressed turns
    fixes: int  # fixed turns
    regressed: list[RegressedCase]
    metric_changes: list[MetricChange]
    compare_url: str
    markdown: str = ""
    significance: GateSignificance | None = None
    # With ``ignore_triaged``: the regressed turns left out (not in ``regressed``, nor counted
    # against ``max_regressions``; in ``regressions``, the machine's count), the failing cases
    # left out of the pass rate (every failing turn of theirs triaged so), and the pass rate
    # without them (None: no case was left out).
    triaged: list[TriagedTurn] = field(default_factory=list)
    triaged_cases: int = 0
    triaged_pass_rate: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.run.summary.pass_rate

    @property
    def gated_pass_rate(self) -> float | None:
        """The pass rate ``min_pass_rate`` is checked against: without the cases triaged out
        when some were."""
        return self.triaged_pass_rate if self.triaged_cases else self.pass_rate

    @property
    def baseline_pass_rate(self) -> float | None:
        return self.baseline.summary.pass_rate


# --- the summary ------------------------------------------------------------------------------


def gate_markdown(result: GateResult, options: GateOptions) -> str:
    """The summary for a pull-request comment."""
    parts = [
        _md_title(result),
        _md_runs(result, options),
        _md_table(result),
        _md_significance(result),
        _md_reasons(result),
        _md_regressed(result),
        _md_triaged(result, options),
        _md_metrics(result),
        f"[Full comparison]({result.compare_url})",
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


def _md_significance(result: GateResult) -> str:
    found = result.significance
    if found is None:
        return ""
    sides = (
        f"runs {', '.join(f'#{i}' for i in found.after_runs)} against "
        f"{', '.join(f'#{i}' for i in found.before_runs)}"
    )
    line = f"**Significance** ({sides}, over their repetitions): {_md(found.text)}."
    if found.difference is not None:
        interval = ""
        if found.ci_low is not None and found.ci_high is not None:
            interval = (
                f" ({found.confidence * 100:g} % confidence interval "
                f"{format_points(found.ci_low)} to {format_points(found.ci_high)})"
            )
        line += f" Pass-rate change {format_points(found.difference)}{interval}."
    return line


def _md_title(result: GateResult) -> str:
    if result.passed:
        return f"## ✅ HoloDeck gate passed: {_md(result.run.agent_name)}"
    return f"## ❌ HoloDeck gate failed: {_md(result.run.agent_name)}"


def _md_runs(result: GateResult, options: GateOptions) -> str:
    base_url = options.base_url.rstrip("/")
    kinds = ""
    if options.kinds:
        kinds = f" Regressions and metrics counted for {', '.join(options.kinds)} only."
    return (
        f"Run {_md_run(result.run, base_url)} against baseline "
        f"{_md_run(result.baseline, base_url)}: {_md(result.baseline_rule)}.{kinds}"
    )


def _md_run(run: GateRun, base_url: str) -> str:
    where = [f"`{run.git_commit[:8]}`" if run.git_commit else "", _md(run.git_branch)]
    said = " on ".join(part for part in where if part)
    return f"[#{run.id}]({base_url}/runs/{run.id}/)" + (f" ({said})" if said else "")


# (row label, field of OutcomeCounts, shown for cases and for turns)
_COUNT_ROWS: tuple[tuple[str, str], ...] = tuple(
    (outcome.label, outcome.value) for outcome in MAIN_OUTCOMES
)


def _md_table(result: GateResult) -> str:
    run, base = result.run, result.baseline
    rate_change = (
        format_points(result.pass_rate - result.baseline_pass_rate)
        if result.pass_rate is not None and result.baseline_pass_rate is not None
        else ""
    )
    lines = [
        f"| | run #{run.id} | baseline #{base.id} | change |",
        "| --- | --- | --- | --- |",
        f"| pass rate | {format_rate(result.pass_rate)} | "
        f"{format_rate(result.baseline_pass_rate)} | {rate_change} |",
    ]
    for scope in ("cases", "turns"):
        now: OutcomeCounts = getattr(run.summary, scope)
        then: OutcomeCounts = getattr(base.summary, scope)
        lines.append(_count_row(scope, now.total, then.total))
        lines += [
            _count_row(f"{scope} {label}", getattr(now, name), getattr(then, name))
            for label, name in _COUNT_ROWS
        ]
    lines += _md_cost_rows(run, base)
    # With significance, the plain count holds every regressed turn; the rows under it say
    # how many were significant and how many changes were noise.
    regressed = "regressed turns" if result.significance is None else "regressed turns (all)"
    lines += [
        f"| {regressed} | {result.regressions} | | |",
        f"| fixed turns | {result.fixes} | | |",
    ]
    if result.significance is not None:
        lines += [
            f"| significantly regressed turns | {result.significance.worse} | | |",
            f"| changes within noise | {result.significance.noise} | | |",
        ]
    if result.triaged:
        lines.append(f"| regressed turns triaged, ignored | {len(result.triaged)} | | |")
    if result.triaged_cases:
        lines.append(
            f"| pass rate without the {plural(result.triaged_cases, 'triaged case')} | "
            f"{format_rate(result.triaged_pass_rate)} | | |"
        )
    return "\n".join(lines)


def _md_cost_rows(run: GateRun, base: GateRun) -> list[str]:
    """Cost, agent cost and judge cost of both runs; the change only where both are known."""
    error = run.cost_error or base.cost_error
    if error:
        return [f"| cost | {_md(error)} | | |"]
    if run.cost is None or base.cost is None:
        return []
    rows = []
    for label, now, then in (
        ("cost", run.cost.both, base.cost.both),
        ("agent cost", run.cost.agent, base.cost.agent),
        ("judge cost", run.cost.judge, base.cost.judge),
    ):
        rows.append(
            f"| {label} | {_md(format_cost(now))} | {_md(format_cost(then))} "
            f"| {_cost_change(now, then)} |"
        )
    return rows


def _cost_change(now: Cost, then: Cost) -> str:
    if not (now.known and then.known):
        return ""
    change = now.usd - then.usd
    return f"{'+' if change >= 0 else '-'}{format_usd(abs(change))}"


def _count_row(label: str, now: int, then: int) -> str:
    return f"| {label} | {now} | {then} | {now - then:+d} |"


def _md_reasons(result: GateResult) -> str:
    if not result.reasons:
        return ""
    return "**Failed because:**\n\n" + "\n".join(f"- {reason}" for reason in result.reasons)


def _md_regressed(result: GateResult) -> str:
    """The regressed cases: how many of their turns regressed (the counts add up to the
    headline's regressed turns) and which ones. With significance, the significantly regressed
    turns, and apart the changes within noise (which the gate does not count)."""
    found = result.significance
    if found is None:
        return _regressed_table("Regressed cases", "regressed turns", result.regressed)
    tables = [
        _regressed_table(
            "Significant regressions", "significantly regressed turns", found.regressed
        ),
        _noise_table(found.noise_turns),
    ]
    return "\n\n".join(table for table in tables if table)


def _regressed_table(title: str, counted: str, cases: Sequence[RegressedCase]) -> str:
    if not cases:
        return ""
    total = sum(len(case.turns) for case in cases)
    lines = [
        f"### {title} ({plural(len(cases), 'case')}, {plural(total, 'turn')})",
        "",
        f"| case | {counted} (count) | which turns | side by side |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {_md(case.key)} | {len(case.turns)} | {_turns_text(case.turns)} | "
        f"[compare]({case.url}) |"
        for case in cases
    ]
    lines.append(f"| total | {total} | | |")
    return "\n".join(lines)


def _turns_text(turns: Sequence[int]) -> str:
    """``"turn 1, turn 3"``: the turns numbered as every page numbers them (from 1)."""
    return ", ".join(turn_text(turn) for turn in turns)


def _noise_table(turns: Sequence[NoisyTurn]) -> str:
    if not turns:
        return ""
    lines = [
        f"### Changes within noise ({plural(len(turns), 'turn')}; not significant, "
        "not counted as regressions)",
        "",
        "| case | turn | baseline side passed | run side passed | change | side by side |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for turn in turns:
        before = pass_rate_of(turn.passed_before, turn.n_before)
        after = pass_rate_of(turn.passed_after, turn.n_after)
        change = None if before is None or after is None else after - before
        lines.append(
            f"| {_md(turn.key)} | {turn_text(turn.turn)} | "
            f"{turn.passed_before} of {turn.n_before} | {turn.passed_after} of {turn.n_after} | "
            f"{format_points(change)} | [compare]({turn.url}) |"
        )
    return "\n".join(lines)


def _md_triaged(result: GateResult, options: GateOptions) -> str:
    """The regressed turns, and the failing cases, left out of the verdict because people
    triaged them into an ignored category: never silently."""
    if not options.ignore_triaged:
        return ""
    categories = ", ".join(_md(name) for name in options.ignore_triaged)
    parts = [_triaged_table(result.triaged, categories)]
    if result.triaged_cases:
        verb = "is" if result.triaged_cases == 1 else "are"
        parts.append(
            f"{plural(result.triaged_cases, 'failing case')} whose every failure was triaged "
            f"into {categories} {verb} left out of the pass rate checked: "
            f"{format_rate(result.triaged_pass_rate)} (the run's own: "
            f"{format_rate(result.pass_rate)})."
        )
    return "\n\n".join(parts)


def _triaged_table(triaged: Sequence[TriagedTurn], categories: str) -> str:
    if not triaged:
        return f"**Triaged, ignored** ({categories}): no regressed turn was triaged so."
    lines = [
        f"### Triaged, ignored ({plural(len(triaged), 'regressed turn')}: {categories}; "
        "left out of the verdict)",
        "",
        "| case | turn | category | triaged by | note | side by side |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for turn in triaged:
        by = _md(turn.by) or NONE_TEXT
        if turn.carried_from_run is not None:
            by += f" (on run #{turn.carried_from_run})"
        lines.append(
            f"| {_md(turn.key)} | {turn_text(turn.turn)} | {_md(turn.category)} | {by} | "
            f"{_md(_short(turn.note))} | [compare]({turn.url}) |"
        )
    return "\n".join(lines)


NOTE_CHARS = 120


def _short(note: str) -> str:
    flat = " ".join(note.split())
    return flat if len(flat) <= NOTE_CHARS else flat[: NOTE_CHARS - 1] + "…"


def _md_metrics(result: GateResult) -> str:
    """Every metric of either run: the run's per-turn counts, its average and the change from
    the baseline's, with the drop allowed when one was set. Metrics whose average dropped (or
    that the run no longer has) are listed under "Metric drops"; the others (risen, unchanged,
    new) apart, so a rise never reads as a drop."""
    if not result.metric_changes:
        return ""
    dropped = [change for change in result.metric_changes if _dropped(change)]
    others = [change for change in result.metric_changes if not _dropped(change)]
    tables = [
        _metric_table(f"Metric drops ({len(dropped)}, counted per turn)", dropped),
        _metric_table("Other metrics (risen, unchanged or new; counted per turn)", others),
    ]
    return "\n\n".join(table for table in tables if table)


def _dropped(change: MetricChange) -> bool:
    if change.before is None:
        return False
    return change.after is None or (change.drop or 0.0) > 1e-9


def _metric_table(heading: str, changes: list[MetricChange]) -> str:
    if not changes:
        return ""
    lines = [
        f"### {heading}",
        "",
        "| metric | kind | turns graded | passed | failed | not graded | average | baseline "
        "| change | allowed drop |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for change in changes:
        delta = "" if change.drop is None else format_score_change(-change.drop)
        mark = " ❌" if change.over_limit else ""
        limit = "" if change.limit is None else f"{change.limit:g}"
        turns = change.turns
        counts = (
            f"{turns.evaluated} | {turns.passed} | {turns.failed} | {turns.not_graded}"
            if turns is not None
            else " | ".join([NONE_TEXT] * 4)
        )
        lines.append(
            f"| {_md(change.name)}{mark} | {change.kind} | {counts} | "
            f"{format_score(change.after)} | {format_score(change.before)} | {delta} | {limit} |"
        )
    return "\n".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


MARKDOWN_SPECIALS = "\\`*_[]<>|~"


def _md(text: str) -> str:
    """User text (case and metric names, branches) as literal Markdown on one line."""
    flat = " ".join(text.split())
    return "".join(f"\\{char}" if char in MARKDOWN_SPECIALS else char for char in flat)

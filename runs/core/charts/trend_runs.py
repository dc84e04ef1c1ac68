"""The runs of the trends chart, from plain data: one finished run as the chart shows it, the
re-grades kept apart from the series, its points' hover texts, and where the pass rate dropped
or the prompt or the model changed. The chart's geometry is ``runs.core.charts.trend_chart``'s.

No database and no Django here: the reads (``runs.selectors.trends``) hand over ``TrendRun``
values; every text comes from a run and is escaped by the template.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from runs.core.verdicts.numbers import format_rate
from runs.core.verdicts.outcomes import MAIN_OUTCOMES
from runs.core.verdicts.summary import OutcomeCounts

DEFAULT_MARGIN = 10.0  # percentage points
LABEL_CHARS = 24  # a change marker's label, cut beyond


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
    # Its failing turns (failed, errored, not graded) and how many people triaged, its own
    # reviews counted (None: not counted).
    failures: int | None = None
    triaged: int = 0

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


@dataclass(frozen=True)
class RunChurn:
    """A run's turns against the run before it in the series (``previous``, which may be off
    the chart when only the last runs are drawn): how many regressed and were fixed."""

    previous: int
    regressions: int
    fixes: int


# --- texts and events ------------------------------------------------------------------------


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

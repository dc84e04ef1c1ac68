"""The one summary of a run (and of a case): outcome counts of its cases and turns, and per
metric how many turns it graded, passed, failed or could not grade, with the average score.

Metrics are counted per turn — a metric that ran on 9 turns of 3 cases counts 9 — and labelled
so ("turns graded"); every page, export, compare, trends and the CI gate show these numbers. Not
graded is counted apart everywhere, and a run with nothing graded has no pass rate (None), never
0 %. It is computed here, from plain verdicts, and stored with the run when the run ends.

HoloDeck's own ``ReportSummary`` (``runs.core.wire.models``) stays in result files for
compatibility: it counts cases and calls every case that did not pass "failed".
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from pydantic import BaseModel, ConfigDict, computed_field

from runs.core.verdicts.kinds import kind_order
from runs.core.verdicts.numbers import pass_rate_of
from runs.core.verdicts.outcomes import Outcome, RunState


class OutcomeCounts(BaseModel):
    """How many cases (or turns) ended with each outcome; ``pending`` have none yet. The one
    shape of a run's counts: every surface (the run page's tiles and its poll, the lists, the
    API, the exports, compare, trends, the gate) shows these, each word with one meaning —
    passed; failed (graded and wrong, never errored); error (shown "errored": no answer to
    grade); not graded (a grader or judge could not grade); skipped (a turn not run after its
    session broke, or of a case that errored before it); cancelled; pending (no verdict yet).
    They add up: ``total`` is their sum (``sum``)."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on re-read

    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    not_graded: int = 0
    skipped: int = 0
    cancelled: int = 0
    pending: int = 0

    @property
    def sum(self) -> int:
        """The sum of every outcome's count: ``total`` when the counts add up."""
        return builtins.sum(getattr(self, outcome) for outcome in _COUNTED)

    @property
    def done(self) -> int:
        """Those with a verdict (all but pending)."""
        return self.total - self.pending

    @property
    def done_percent(self) -> int:
        """How far along, in whole % (100 with nothing to do)."""
        return min(100, self.done * 100 // self.total) if self.total else 100

    @computed_field  # type: ignore[prop-decorator]
    @property
    def graded(self) -> int:
        """Counted in the pass rate: passed, failed and errored."""
        return self.passed + self.failed + self.error

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float | None:
        """Passed over graded, in % (two decimals); None when nothing was graded."""
        return pass_rate_of(self.passed, self.graded)

    @classmethod
    def counted(cls, outcomes: Iterable[str | None]) -> OutcomeCounts:
        return cls.tallied(Counter(outcomes).items())

    @classmethod
    def tallied(cls, tally: Iterable[tuple[str | None, int]]) -> OutcomeCounts:
        """From (outcome, how many) pairs, e.g. a GROUP BY outcome."""
        counts = cls()
        for value, number in tally:
            outcome = Outcome.of(value)
            field = outcome.value if outcome.value in _COUNTED else Outcome.PENDING.value
            setattr(counts, field, getattr(counts, field) + number)
            counts.total += number
        return counts


_COUNTED = frozenset(OutcomeCounts.model_fields) - {"total"}


class MetricSummary(BaseModel):
    """One metric over the turns that ran it."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on re-read

    name: str
    kind: str
    evaluated: int  # turns graded by it
    passed: int
    failed: int
    not_graded: int  # could not grade (a judge without a verdict, a grader error)
    average: float | None  # of the scores it produced (4 decimals)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float | None:
        return pass_rate_of(self.passed, self.passed + self.failed)


class RunSummary(BaseModel):
    """Cases, turns and metrics of a run (or of one case). ``pass_rate`` is the cases'.

    ``tools``: the turns that asserted tool calls, by their tool verdict (``passed``, or
    ``failed``: a tool not called, or called with other arguments); None in a summary stored
    before they were counted (``runs.selectors.run_summaries`` counts them from the rows)."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on re-read

    cases: OutcomeCounts
    turns: OutcomeCounts
    metrics: list[MetricSummary]
    tools: OutcomeCounts | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float | None:
        return self.cases.pass_rate

    def run_status(self) -> str:
        """The status a finished run ends with: ``cancelled`` when a cancel stopped some of
        its cases (a re-grade of a cancelled run holds them too, and ends as its original);
        ``error`` when every case that ran failed to execute; ``passed`` when every case
        passed; else ``failed`` — a case that could not be graded counts in no pass rate, but
        it is no pass either, so a run (and a CI job) with one does not pass silently."""
        cases = self.cases
        if cases.cancelled:
            return RunState.CANCELLED.value
        if cases.error and cases.error == cases.total - cases.cancelled:
            return RunState.ERROR.value
        if cases.total and cases.passed == cases.total:
            return RunState.PASSED.value
        return RunState.FAILED.value

    @classmethod
    def empty(cls) -> RunSummary:
        return cls(cases=OutcomeCounts(), turns=OutcomeCounts(), metrics=[], tools=OutcomeCounts())

    @classmethod
    def stored(cls, data: object) -> RunSummary | None:
        """A summary stored as JSON (None when it has none, or an older shape)."""
        if not isinstance(data, dict) or "cases" not in data:
            return None
        keys = ("cases", "turns", "metrics", "tools")
        return cls.model_validate({key: data[key] for key in keys if key in data})


@dataclass(frozen=True)
class MetricMark:
    """One metric's verdict on one turn."""

    name: str
    kind: str
    outcome: str
    score: float | None


@dataclass(frozen=True)
class MetricTally:
    """How many turns one metric ended with one outcome, and the sum and number of the scores
    it gave them (a GROUP BY metric, kind, outcome)."""

    name: str
    kind: str
    outcome: str
    count: int
    score_sum: float | None
    scored: int


def summarize(
    *,
    case_outcomes: Iterable[str | None],
    turn_outcomes: Iterable[str | None],
    metrics: Iterable[MetricMark],
    tool_outcomes: Iterable[str] | None = None,
) -> RunSummary:
    """The summary from plain verdicts: every case's outcome, every turn's, every metric's,
    and the tool verdict of every turn that asserted tool calls (None: not counted)."""
    return summarize_tallies(
        cases=Counter(case_outcomes).items(),
        turns=Counter(turn_outcomes).items(),
        tools=None if tool_outcomes is None else Counter(tool_outcomes).items(),
        metrics=[
            MetricTally(mark.name, mark.kind, mark.outcome, 1, mark.score,
                        int(mark.score is not None))
            for mark in metrics
        ],
    )  # fmt: skip


def summarize_tallies(
    *,
    cases: Iterable[tuple[str | None, int]],
    turns: Iterable[tuple[str | None, int]],
    metrics: Iterable[MetricTally],
    tools: Iterable[tuple[str | None, int]] | None = None,
) -> RunSummary:
    """The summary from counts (what a database counts with GROUP BY): the one computation;
    ``tools``: the turns' tool verdicts (None: not counted)."""
    return RunSummary(
        cases=OutcomeCounts.tallied(cases),
        turns=OutcomeCounts.tallied(turns),
        metrics=metric_summaries(metrics),
        tools=None if tools is None else OutcomeCounts.tallied(tools),
    )


def metric_summaries(tallies: Iterable[MetricTally]) -> list[MetricSummary]:
    """Per metric over the turns that ran it: a skipped metric counts nowhere; a grader that
    could not grade ("error") and a judge without a verdict count as not graded."""
    table: dict[str, _MetricTotals] = {}
    for tally in tallies:
        outcome = Outcome.of(tally.outcome)
        if outcome is Outcome.SKIPPED:
            continue
        totals = table.setdefault(tally.name, _MetricTotals(tally.kind))
        totals.evaluated += tally.count
        if outcome is Outcome.PASSED:
            totals.passed += tally.count
        elif outcome in (Outcome.ERROR, Outcome.NOT_GRADED):
            totals.not_graded += tally.count
        else:
            totals.failed += tally.count
        if tally.scored and tally.score_sum is not None:
            totals.score_sum += tally.score_sum
            totals.scored += tally.scored
    out = [totals.summary(name) for name, totals in table.items()]
    return sorted(out, key=lambda metric: (kind_order(metric.kind), metric.name))


@dataclass
class _MetricTotals:
    kind: str
    evaluated: int = 0
    passed: int = 0
    failed: int = 0
    not_graded: int = 0
    score_sum: float = 0.0
    scored: int = 0

    def summary(self, name: str) -> MetricSummary:
        average = round(self.score_sum / self.scored, 4) if self.scored else None
        # Its counts as they are (the score's sum and count are left out: extra="ignore").
        return MetricSummary(name=name, average=average, **asdict(self))

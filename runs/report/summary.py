"""The one summary of a run (and of a case): outcome counts of its cases and turns, and per
metric how many turns it graded, passed, failed or could not grade, with the average score.

Metrics are counted per turn — a metric that ran on 9 turns of 3 cases counts 9 — and labelled
so ("turns graded"); every page, export, compare, trends and the CI gate show these numbers. Not
graded is counted apart everywhere, and a run with nothing graded has no pass rate (None), never
0 %. It is computed here, from plain verdicts, and stored with the run when the run ends.

HoloDeck's own ``ReportSummary`` (``runs.report.models``) stays in result files for
compatibility: it counts cases and calls every case that did not pass "failed".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, computed_field

from runs.report.kinds import kind_order
from runs.report.numbers import pass_rate_of
from runs.report.outcomes import Outcome


class OutcomeCounts(BaseModel):
    """How many cases (or turns) ended with each outcome; ``pending`` have none yet."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on re-read

    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    not_graded: int = 0
    skipped: int = 0
    cancelled: int = 0
    pending: int = 0

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
        counts = cls()
        for value in outcomes:
            outcome = Outcome.of(value)
            field = outcome.value if outcome.value in _COUNTED else "pending"
            setattr(counts, field, getattr(counts, field) + 1)
            counts.total += 1
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
    """Cases, turns and metrics of a run (or of one case). ``pass_rate`` is the cases'."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on re-read

    cases: OutcomeCounts
    turns: OutcomeCounts
    metrics: list[MetricSummary]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float | None:
        return self.cases.pass_rate

    @classmethod
    def empty(cls) -> RunSummary:
        return cls(cases=OutcomeCounts(), turns=OutcomeCounts(), metrics=[])

    @classmethod
    def stored(cls, data: object) -> RunSummary | None:
        """A summary stored as JSON (None when it has none, or an older shape)."""
        if not isinstance(data, dict) or "cases" not in data:
            return None
        return cls.model_validate({key: data[key] for key in ("cases", "turns", "metrics")})


@dataclass(frozen=True)
class MetricMark:
    """One metric's verdict on one turn."""

    name: str
    kind: str
    outcome: str
    score: float | None


# A metric's outcome -> its column in the summary ("error": a grader could not grade).
_METRIC_COLUMN = {
    Outcome.PASSED: Outcome.PASSED.value,
    Outcome.ERROR: Outcome.NOT_GRADED.value,
    Outcome.NOT_GRADED: Outcome.NOT_GRADED.value,
}


_COLUMNS = (Outcome.PASSED.value, Outcome.FAILED.value, Outcome.NOT_GRADED.value)


def summarize(
    *,
    case_outcomes: Iterable[str | None],
    turn_outcomes: Iterable[str | None],
    metrics: Iterable[MetricMark],
) -> RunSummary:
    """The summary from plain verdicts: every case's outcome, every turn's, every metric's."""
    return RunSummary(
        cases=OutcomeCounts.counted(case_outcomes),
        turns=OutcomeCounts.counted(turn_outcomes),
        metrics=metric_summaries(metrics),
    )


def metric_summaries(marks: Iterable[MetricMark]) -> list[MetricSummary]:
    table: dict[str, dict[str, object]] = {}
    scores: dict[str, list[float]] = {}
    for mark in marks:
        row = table.setdefault(
            mark.name,
            {"name": mark.name, "kind": mark.kind, "evaluated": 0, **dict.fromkeys(_COLUMNS, 0)},
        )
        outcome = Outcome.of(mark.outcome)
        if outcome is Outcome.SKIPPED:
            continue
        row["evaluated"] = int(row["evaluated"]) + 1  # type: ignore[call-overload]
        key = _METRIC_COLUMN.get(outcome, Outcome.FAILED.value)
        row[key] = int(row[key]) + 1  # type: ignore[call-overload]
        if mark.score is not None:
            scores.setdefault(mark.name, []).append(mark.score)
    out = [
        MetricSummary.model_validate({**row, "average": _mean(scores.get(str(row["name"])))})
        for row in table.values()
    ]
    return sorted(out, key=lambda metric: (kind_order(metric.kind), metric.name))


def _mean(values: list[float] | None) -> float | None:
    return round(sum(values) / len(values), 4) if values else None

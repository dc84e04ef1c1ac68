"""What a case's (or a turn's) repetitions say together, read from their stored outcomes: how
often it passed, pass@k and pass^k, and whether it is flaky — it passed in some repetitions and
failed in others of the same run (the only thing called "flaky"). Django-free: the run page,
the exports and the API count repetitions with these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev

from runs.core.stats.significance import pass_at_k, pass_hat_k
from runs.core.verdicts.outcomes import BAD, GRADED_VALUES, Outcome


@dataclass(frozen=True)
class RepeatStats:
    """The repetitions of one case or turn: ``graded`` of them passed or failed (errored counts
    as failed, as in pass rates); the others were not graded, skipped, cancelled or pending."""

    repetitions: int
    passed: int
    failed: int

    @property
    def graded(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        """Passed over graded repetitions, in %; None when none was graded."""
        return self.passed * 100 / self.graded if self.graded else None

    @property
    def flaky(self) -> bool:
        return self.passed > 0 and self.failed > 0

    def pass_at(self, k: int) -> float | None:
        """pass@k in %: the chance that at least one of k repetitions drawn passes."""
        value = pass_at_k(self.graded, self.passed, k) if self.graded else None
        return None if value is None else value * 100

    def pass_all(self, k: int) -> float | None:
        """pass^k in %: the chance that all of k repetitions drawn pass."""
        value = pass_hat_k(self.graded, self.passed, k) if self.graded else None
        return None if value is None else value * 100

    @property
    def ks(self) -> list[int]:
        """The k shown for pass@k and pass^k: 1 up to the graded repetitions (at most 5)."""
        return list(range(1, min(self.graded, 5) + 1))


def repeat_stats(outcomes: Iterable[str]) -> RepeatStats:
    """The stats of one unit's repetitions from their stored outcomes."""
    values = list(outcomes)
    return RepeatStats(
        repetitions=len(values),
        passed=sum(1 for value in values if value == Outcome.PASSED),
        failed=sum(1 for value in values if value in BAD),
    )


def stats_by_unit(rows: Iterable[tuple[int, str]]) -> dict[int, RepeatStats]:
    """``repeat_stats`` of each unit (a case's index, a turn's index) of (unit, outcome) rows."""
    grouped: dict[int, list[str]] = {}
    for unit, outcome in rows:
        grouped.setdefault(unit, []).append(outcome)
    return {unit: repeat_stats(values) for unit, values in grouped.items()}


@dataclass(frozen=True)
class RunRepeatStats:
    """A repeated run's cases together. pass@k and pass^k are at k = the run's repeats and
    averaged over its ``complete`` cases only — those all of whose repetitions were graded —
    so a case cancelled, pending or not graded in some repetition claims nothing (as τ-bench
    reports pass^k over finished trials); ``flaky`` counts the cases with a pass and a failure,
    of ``judged``, those with two graded repetitions or more. ``live``: the run goes on, and
    the tile says "so far"."""

    repeats: int
    cases: int
    complete: int
    judged: int
    flaky: int
    pass_at_k: float | None
    pass_hat_k: float | None
    live: bool = False

    @property
    def incomplete(self) -> int:
        """Cases with a repetition not graded (yet): left out of pass@k and pass^k."""
        return self.cases - self.complete


def run_repeat_stats(
    by_case: Mapping[int, RepeatStats], repeats: int, *, live: bool = False
) -> RunRepeatStats:
    complete = [stats for stats in by_case.values() if stats.graded >= repeats]
    at = [v for stats in complete if (v := stats.pass_at(repeats)) is not None]
    all_ = [v for stats in complete if (v := stats.pass_all(repeats)) is not None]
    return RunRepeatStats(
        repeats=repeats,
        cases=len(by_case),
        complete=len(complete),
        judged=sum(1 for stats in by_case.values() if stats.graded >= 2),
        flaky=sum(1 for stats in by_case.values() if stats.flaky),
        pass_at_k=fmean(at) if at else None,
        pass_hat_k=fmean(all_) if all_ else None,
        live=live,
    )


@dataclass(frozen=True)
class ScoreSpread:
    """One metric's scores over a case's repetitions: their mean and (population) spread."""

    name: str
    count: int
    mean: float
    spread: float


def score_spreads(rows: Iterable[tuple[str, float | None]]) -> list[ScoreSpread]:
    """Per metric name (in the order first seen), the mean and spread of its stored scores."""
    scores: dict[str, list[float]] = {}
    for name, score in rows:
        if score is not None:
            scores.setdefault(name, []).append(float(score))
    return [_spread(name, values) for name, values in scores.items()]


def _spread(name: str, values: Sequence[float]) -> ScoreSpread:
    return ScoreSpread(name=name, count=len(values), mean=fmean(values), spread=pstdev(values))


# --- a repeated unit's one verdict ----------------------------------------------------------


def merged_outcome(outcomes: Sequence[str]) -> str:
    """One verdict for a unit's repetitions, as compare reads it: passed when more than half of
    its graded repetitions passed (it passes as a rule), else failed — errored when every
    graded one errored; a unit with no graded repetition keeps the first's verdict (not graded,
    skipped, cancelled, pending). How far from certain that is, the cell's count and the
    significance test say."""
    graded = [outcome for outcome in outcomes if outcome in GRADED_VALUES]
    if not graded:
        return outcomes[0] if outcomes else ""
    if all(outcome == Outcome.ERROR for outcome in graded):
        return Outcome.ERROR.value
    passed = sum(1 for outcome in graded if outcome == Outcome.PASSED)
    return Outcome.PASSED.value if passed * 2 > len(graded) else Outcome.FAILED.value

"""How one metric agrees with people, Django-free: over the turns people reviewed, the metric's
verdict on each turn beside the person's, the 2×2 confusion matrix, raw agreement, Cohen's
kappa with its 95 % confidence interval, the disagreements, and the threshold that would have
agreed best with people.

From a turn's review to a metric's verdict
------------------------------------------
People review a turn, not each of its metrics. A turn's human verdict says what the turn's
verdict should have been (``HumanVerdict.human_passed``), and this module reads it as the same
verdict on each metric that graded the turn:

- "agrees with the machine": the person agrees with every metric's verdict on the turn (a
  metric that passed should pass, one that failed should fail);
- "should have passed": every metric of the turn should have passed, so each one that failed
  was wrong (and each one that passed was right);
- "should have failed": every metric of the turn should have failed, so each one that passed
  was wrong. With several metrics on a turn this charges each passing one: read a low
  agreement of a metric next to the turns' notes;
- "could not tell": left out of every metric's count, and counted apart (``unsure``).

A metric that did not give a verdict on the turn (it errored, could not grade, or was
skipped) has nothing to compare: left out, and counted apart (``not_graded``).

Kappa and its interval come from statsmodels (``statsmodels.stats.inter_rater.cohens_kappa``),
never from a hand-written formula. Kappa is undefined when both raters put every turn in one
and the same class (expected agreement 1): it is ``None`` then, and so with no pair at all.

The best-agreeing threshold is found by trying each distinct score of the reviewed turns as a
threshold (a turn passes when its score is at least the threshold, as every grader decides);
it is shown, never applied.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from runs.core.reviewing.vocabulary import HumanVerdict
from runs.core.verdicts.outcomes import Outcome

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Judged:
    """One reviewed turn as one metric saw it: its verdict on the turn (its stored outcome),
    its score and threshold, and the person's verdict on the turn."""

    turn_id: int
    outcome: str  # the metric's outcome on the turn (runs.core.verdicts.outcomes)
    verdict: str  # the turn's human verdict (a HumanVerdict value)
    score: float | None = None
    threshold: float | None = None

    @property
    def machine_passed(self) -> bool | None:
        """The metric's verdict: None when it gave none (error, not graded, skipped)."""
        outcome = Outcome.shown(self.outcome)
        if outcome.is_passed:
            return True
        return False if outcome.is_failed else None

    @property
    def human_passed(self) -> bool | None:
        """What the person says this metric's verdict should have been (None: unsure)."""
        machine = self.machine_passed
        if machine is None:
            return None
        try:
            verdict = HumanVerdict(self.verdict)
        except ValueError:
            return None
        return verdict.human_passed(machine)


@dataclass(frozen=True)
class Confusion:
    """The 2×2 table: rows the machine's verdict, columns the person's (pass, fail)."""

    both_pass: int = 0  # the metric passed, the person says pass
    false_pass: int = 0  # the metric passed, the person says fail
    false_fail: int = 0  # the metric failed, the person says pass
    both_fail: int = 0  # the metric failed, the person says fail

    @property
    def table(self) -> list[list[int]]:
        return [[self.both_pass, self.false_pass], [self.false_fail, self.both_fail]]

    @property
    def total(self) -> int:
        return self.both_pass + self.false_pass + self.false_fail + self.both_fail

    @property
    def agreed(self) -> int:
        return self.both_pass + self.both_fail

    @classmethod
    def of(cls, pairs: Iterable[tuple[bool, bool]]) -> Confusion:
        """From (machine passed, human passed) pairs."""
        cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
        for pair in pairs:
            cells[pair] += 1
        return cls(
            cells[(True, True)], cells[(True, False)], cells[(False, True)], cells[(False, False)]
        )


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa and its confidence interval (statsmodels' asymptotic one)."""

    value: float
    low: float
    high: float
    confidence: float = CONFIDENCE


@dataclass(frozen=True)
class Disagreement:
    """A reviewed turn where the metric and the person differ."""

    turn_id: int
    machine_passed: bool
    human_passed: bool
    score: float | None


@dataclass(frozen=True)
class BestThreshold:
    """The threshold over the reviewed turns' scores that agrees best with people: how many
    turns it agrees on, of how many scored ones, against how many the current verdicts agree
    on (shown, never applied)."""

    threshold: float
    agreed: int
    total: int
    current_agreed: int
    current_threshold: float | None = None

    @property
    def gains(self) -> int:
        return self.agreed - self.current_agreed


@dataclass(frozen=True)
class Agreement:
    """How one metric agrees with people over the turns they reviewed."""

    metric: str
    kinds: tuple[str, ...] = ()
    confusion: Confusion = field(default_factory=Confusion)
    unsure: int = 0  # reviewed "could not tell": left out
    not_graded: int = 0  # the metric gave no verdict on the reviewed turn: left out
    kappa: Kappa | None = None
    disagreements: tuple[Disagreement, ...] = ()
    best: BestThreshold | None = None
    threshold: float | None = None  # the metric's threshold on the reviewed turns (most common)

    @property
    def n(self) -> int:
        return self.confusion.total

    @property
    def agreed(self) -> int:
        return self.confusion.agreed

    @property
    def rate(self) -> float | None:
        """Raw agreement, 0..1 (None with no pair)."""
        return self.agreed / self.n if self.n else None

    @property
    def left_out(self) -> int:
        return self.unsure + self.not_graded

    @property
    def summary(self) -> str:
        """One line: "people agree 8/10, κ 0.60" ("no reviewed turn" without a pair)."""
        if not self.n:
            return "no reviewed turn"
        kappa = "undefined" if self.kappa is None else f"{self.kappa.value:.2f}"
        return f"people agree {self.agreed}/{self.n}, κ {kappa}"


def agreement_of(metric: str, judged: Iterable[Judged], kinds: Sequence[str] = ()) -> Agreement:
    """How ``metric`` agrees with people over ``judged`` (its reviewed turns)."""
    pairs: list[tuple[Judged, bool, bool]] = []
    unsure = not_graded = 0
    rows = list(judged)
    for row in rows:
        machine = row.machine_passed
        if machine is None:
            not_graded += 1
            continue
        human = row.human_passed
        if human is None:
            unsure += 1
            continue
        pairs.append((row, machine, human))
    confusion = Confusion.of((machine, human) for _, machine, human in pairs)
    return Agreement(
        metric=metric,
        kinds=tuple(kinds),
        confusion=confusion,
        unsure=unsure,
        not_graded=not_graded,
        kappa=cohens_kappa(confusion),
        disagreements=tuple(
            Disagreement(row.turn_id, machine, human, row.score)
            for row, machine, human in pairs
            if machine != human
        ),
        best=best_threshold([(row, human) for row, _, human in pairs]),
        threshold=_common_threshold(row.threshold for row, _, _ in pairs),
    )


def cohens_kappa(confusion: Confusion) -> Kappa | None:
    """Cohen's kappa of the table with its 95 % interval, by statsmodels; None when it is
    undefined (no pair, or both raters put every turn in the same one class)."""
    if confusion.total == 0:
        return None
    # lazy: statsmodels costs ~1 s at import and only the calibration page needs it
    from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # Its interval is the 95 % one (statsmodels' fixed alpha of 0.05, two-sided).
        result = statsmodels_kappa(np.array(confusion.table, dtype=float), return_results=True)
    value, low, high = float(result.kappa), float(result.kappa_low), float(result.kappa_upp)
    if not all(math.isfinite(number) for number in (value, low, high)):
        return None
    return Kappa(value, low, high)


def best_threshold(scored: Sequence[tuple[Judged, bool]]) -> BestThreshold | None:
    """Try each distinct score as the threshold (pass iff score >= it) against the person's
    verdicts; the one agreeing on most turns wins, a tie going to the one nearest the current
    threshold, then to the lower one. None without a scored turn."""
    rows = [
        (float(row.score), human, row.machine_passed)
        for row, human in scored
        if row.score is not None and math.isfinite(row.score)
    ]
    if not rows:
        return None
    current = _common_threshold(row.threshold for row, _ in scored)
    current_agreed = sum(1 for _, human, machine in rows if machine == human)

    def agreed_at(threshold: float) -> int:
        return sum(1 for score, human, _ in rows if (score >= threshold) == human)

    def rank(threshold: float) -> tuple[int, float, float]:
        distance = abs(threshold - current) if current is not None else 0.0
        return (-agreed_at(threshold), distance, threshold)

    best = min(sorted({score for score, _, _ in rows}), key=rank)
    return BestThreshold(best, agreed_at(best), len(rows), current_agreed, current)


def _common_threshold(thresholds: Iterable[float | None]) -> float | None:
    """The most common threshold (the highest of equally common ones); None if none is set."""
    counts: dict[float, int] = {}
    for threshold in thresholds:
        if threshold is not None and math.isfinite(threshold):
            counts[float(threshold)] = counts.get(float(threshold), 0) + 1
    if not counts:
        return None
    return max(counts, key=lambda threshold: (counts[threshold], threshold))


def kappa_reading(kappa: float | None) -> str:
    """Landis and Koch's words for a kappa (a guide, not a verdict)."""
    if kappa is None:
        return "undefined"
    for bound, words in _READINGS:
        if kappa <= bound:
            return words
    return "almost perfect"


_READINGS = (
    (0.0, "no better than chance"),
    (0.2, "slight"),
    (0.4, "fair"),
    (0.6, "moderate"),
    (0.8, "substantial"),
)

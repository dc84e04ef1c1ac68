"""Is a change real or a coin flip? Statistics for comparing repeated runs, used by the compare
page and the CI gate. Django-free (no database, no models): outcomes and scores come in as
plain sequences.

A **unit** is whatever is compared: a case, or a case's turn. Each side of a comparison (before,
after) holds a unit's repeated outcomes (True: passed) or scores. Sides are **paired** when the
caller says repetition i of both sides belongs together (several runs at the same commits, or
the same seeds); then McNemar's exact test (outcomes) or Wilcoxon's signed-rank test (scores) is
used, else Fisher's exact test or the Mann–Whitney U test. Sides of different lengths cannot be
paired and get the unpaired test; ``test`` always says which one ran.

Pass rates are percentages 0–100 and their differences percentage points (after − before), as
``runs.core.verdicts.numbers`` reads them; they are not rounded here. Every p-value is two-sided.
Over the units of one comparison, p-values are adjusted with Benjamini–Hochberg (q-values), and a
unit is significantly worse or better only when its q-value is at most alpha. See
docs/significance.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "NO_EVIDENCE",
    "SIGNIFICANTLY_BETTER",
    "SIGNIFICANTLY_WORSE",
    "Classification",
    "RateDifference",
    "ScoreChange",
    "Significance",
    "TestName",
    "UnitChange",
    "UnitResult",
    "benjamini_hochberg",
    "classify",
    "classify_changes",
    "compare_outcomes",
    "compare_scores",
    "flaky",
    "mcnemar_exact_p",
    "pass_at_k",
    "pass_hat_k",
    "pass_rate_difference",
    "significance_text",
]

Classification = Literal["significantly_worse", "significantly_better", "no_evidence"]
SIGNIFICANTLY_WORSE: Classification = "significantly_worse"
SIGNIFICANTLY_BETTER: Classification = "significantly_better"
NO_EVIDENCE: Classification = "no_evidence"

TestName = Literal["mcnemar_exact", "fisher_exact", "wilcoxon", "mann_whitney_u"]

DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20_210_707  # any fixed number: the same runs always get the same interval
DEFAULT_CONFIDENCE = 0.95
MIN_REPETITIONS = 2  # per side: one run a side can never tell a change from chance

_ONE_RUN = "fewer than 2 outcomes on a side: a single run per side can never be significant"
_ONE_SCORE = "fewer than 2 scores on a side: not testable"
_NO_PAIR_CHANGED = "no repetition changed: every pair is the same"
_NO_SCORE_CHANGED = "every paired difference is zero"
_ALL_SCORES_EQUAL = "every score is the same"
# Bootstrap resamples are drawn in blocks of about this many case indexes (bounded memory).
_BOOTSTRAP_BLOCK = 1 << 20


# --- one unit: pass/fail outcomes -------------------------------------------------------------


@dataclass(frozen=True)
class UnitChange:
    """Two groups of a unit's repeated pass/fail outcomes, compared."""

    n_before: int
    n_after: int
    passed_before: int
    passed_after: int
    rate_before: float | None  # % of the side's outcomes that passed; None: no outcomes
    rate_after: float | None
    difference: float | None  # after − before, percentage points; None: a side is empty
    p: float  # two-sided; 1.0 when not tested
    test: TestName | None  # None: not testable (``reason`` says why)
    reason: str | None  # why p is 1.0: not testable, or nothing to test (no pair changed)


def compare_outcomes(
    before: Sequence[bool], after: Sequence[bool], *, paired: bool = False
) -> UnitChange:
    """Compare a unit's outcomes: McNemar's exact test when ``paired`` (repetition i of both
    sides belongs together) and the sides are as long, else Fisher's exact test on the 2×2
    table. Fewer than 2 outcomes on a side is never significant (p = 1.0)."""
    n_before, n_after = len(before), len(after)
    passed_before, passed_after = sum(map(bool, before)), sum(map(bool, after))
    rate_before, rate_after = _rate(passed_before, n_before), _rate(passed_after, n_after)
    difference = _minus(rate_after, rate_before)

    def change(p: float, test: TestName | None, reason: str | None) -> UnitChange:
        return UnitChange(
            n_before=n_before,
            n_after=n_after,
            passed_before=passed_before,
            passed_after=passed_after,
            rate_before=rate_before,
            rate_after=rate_after,
            difference=difference,
            p=p,
            test=test,
            reason=reason,
        )

    if min(n_before, n_after) < MIN_REPETITIONS:
        return change(1.0, None, _missing("outcomes", n_before, n_after) or _ONE_RUN)
    if paired and n_before == n_after:
        worse, better = _discordant(before, after)
        reason = None if worse + better else _NO_PAIR_CHANGED
        return change(mcnemar_exact_p(worse, better), "mcnemar_exact", reason)
    p = _fisher_p(passed_before, n_before - passed_before, passed_after, n_after - passed_after)
    return change(p, "fisher_exact", None)


def mcnemar_exact_p(worse: int, better: int) -> float:
    """McNemar's exact two-sided p-value from the discordant pairs: ``worse`` passed before and
    failed after, ``better`` the other way round. Under no change each discordant pair is a fair
    coin: a binomial test of ``worse`` out of ``worse + better`` at 1/2; 1.0 with none."""
    if worse < 0 or better < 0:
        raise ValueError("discordant pair counts cannot be negative")
    return _mcnemar_p(worse, better)


def _numpy() -> ModuleType:
    """numpy, imported where an interval or an adjustment is computed."""
    # lazy: numpy costs 0.1-0.2 s at import and every run_agent start loads this module
    import numpy

    return numpy


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported where a test runs: pass@k, pass^k and flaky need none."""
    # lazy: scipy.stats costs ~0.8 s at import and the run page and exports never test
    from scipy import stats

    return stats


@lru_cache(maxsize=4096)
def _mcnemar_p(worse: int, better: int) -> float:
    stats = _scipy_stats()
    # Cached: a comparison of many units has few distinct counts, and scipy's test costs ~1 ms.
    if worse + better == 0:
        return 1.0
    return _p_value(stats.binomtest(worse, worse + better, 0.5).pvalue)


@lru_cache(maxsize=4096)
def _fisher_p(
    passed_before: int, failed_before: int, passed_after: int, failed_after: int
) -> float:
    stats = _scipy_stats()
    table = [[passed_before, failed_before], [passed_after, failed_after]]
    return _p_value(stats.fisher_exact(table).pvalue)


def _discordant(before: Sequence[bool], after: Sequence[bool]) -> tuple[int, int]:
    """(passed before and failed after, failed before and passed after) over the pairs."""
    worse = sum(1 for b, a in zip(before, after, strict=True) if b and not a)
    better = sum(1 for b, a in zip(before, after, strict=True) if a and not b)
    return worse, better


# --- one unit: scores -------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreChange:
    """Two groups of a unit's repeated scores (a metric's), compared."""

    n_before: int
    n_after: int
    mean_before: float | None  # None: no scores on that side
    mean_after: float | None
    delta: float | None  # mean after − mean before
    p: float  # two-sided; 1.0 when not tested
    test: TestName | None  # None: not testable (``reason`` says why)
    reason: str | None


def compare_scores(
    before: Sequence[float], after: Sequence[float], *, paired: bool = False
) -> ScoreChange:
    """Compare a unit's scores: Wilcoxon's signed-rank test on the paired differences when
    ``paired`` and the sides are as long (zero differences dropped; all zero: p = 1.0), else the
    Mann–Whitney U test. Fewer than 2 scores on a side is not testable (p = 1.0)."""
    stats = _scipy_stats()
    for value in (*before, *after):
        if not math.isfinite(value):
            raise ValueError(f"a score must be a finite number, not {value!r}")
    n_before, n_after = len(before), len(after)
    mean_before, mean_after = _mean(before), _mean(after)

    def change(p: float, test: TestName | None, reason: str | None) -> ScoreChange:
        return ScoreChange(
            n_before=n_before,
            n_after=n_after,
            mean_before=mean_before,
            mean_after=mean_after,
            delta=_minus(mean_after, mean_before),
            p=p,
            test=test,
            reason=reason,
        )

    if min(n_before, n_after) < MIN_REPETITIONS:
        return change(1.0, None, _missing("scores", n_before, n_after) or _ONE_SCORE)
    if paired and n_before == n_after:
        differences = [a - b for b, a in zip(before, after, strict=True)]
        if not any(differences):
            return change(1.0, "wilcoxon", _NO_SCORE_CHANGED)
        return change(_p_value(stats.wilcoxon(differences).pvalue), "wilcoxon", None)
    if len({*before, *after}) == 1:
        return change(1.0, "mann_whitney_u", _ALL_SCORES_EQUAL)
    p = stats.mannwhitneyu(before, after, alternative="two-sided").pvalue
    return change(_p_value(p), "mann_whitney_u", None)


# --- a run: the headline pass-rate difference -------------------------------------------------


@dataclass(frozen=True)
class RateDifference:
    """Two runs' pass rates over the cases they share, paired by case: each case counts its
    pass rate over its repetitions (0 or 100 % without repeats)."""

    cases: int  # shared cases with an outcome on both sides
    rate_before: float | None  # the mean of the cases' pass rates, %; None: no shared case
    rate_after: float | None
    difference: float | None  # after − before, percentage points
    ci_low: float | None  # the bootstrap interval of ``difference``; None: fewer than 2 cases
    ci_high: float | None
    confidence: float  # of the interval, e.g. 0.95
    p: float | None  # McNemar's exact p over cases; None unless every case ran once a side
    n_resamples: int
    seed: int


def pass_rate_difference(
    before: Mapping[str, Sequence[bool]],
    after: Mapping[str, Sequence[bool]],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> RateDifference:
    """The pass-rate difference of two runs (case key -> the case's outcomes, one per
    repetition) with a percentile interval from a paired bootstrap over cases
    (``numpy.random.default_rng(seed)``: the same input and seed give the same interval)."""
    np = _numpy()
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    keys = sorted(key for key in before.keys() & after.keys() if before[key] and after[key])
    rates_before = np.array([_fraction(before[key]) for key in keys], dtype=float)
    rates_after = np.array([_fraction(after[key]) for key in keys], dtype=float)
    differences = rates_after - rates_before
    low = high = None
    if len(keys) >= MIN_REPETITIONS:
        low, high = _bootstrap_interval(differences, confidence, n_resamples, seed)
    single = [(before[key], after[key]) for key in keys]
    once = bool(single) and all(len(b) == 1 and len(a) == 1 for b, a in single)
    return RateDifference(
        cases=len(keys),
        rate_before=float(rates_before.mean() * 100) if keys else None,
        rate_after=float(rates_after.mean() * 100) if keys else None,
        difference=float(differences.mean() * 100) if keys else None,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        p=mcnemar_exact_p(*_discordant([b[0] for b, _ in single], [a[0] for _, a in single]))
        if once
        else None,
        n_resamples=n_resamples,
        seed=seed,
    )


def _bootstrap_interval(
    differences: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    """The percentile interval, in points, of the mean of ``differences`` (fractions) over
    ``n_resamples`` resamples of the cases with replacement."""
    np = _numpy()
    rng = np.random.default_rng(seed)
    count = len(differences)
    block = max(1, _BOOTSTRAP_BLOCK // count)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, block):
        rows = min(block, n_resamples - start)
        drawn = rng.integers(0, count, size=(rows, count))
        means[start : start + rows] = differences[drawn].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail]) * 100
    return float(low), float(high)


# --- many units: the correction and the verdicts ----------------------------------------------


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the order given."""
    np = _numpy()
    if not p_values:
        return []
    adjusted = _scipy_stats().false_discovery_control(
        np.asarray(p_values, dtype=float), method="bh"
    )
    return [min(1.0, float(q)) for q in adjusted]


def classify(difference: float | None, q: float, alpha: float = DEFAULT_ALPHA) -> Classification:
    """Significantly worse or better when the adjusted p is at most ``alpha``, by the sign of
    the difference; else no evidence of a change."""
    if difference is None or difference == 0 or q > alpha:
        return NO_EVIDENCE
    return SIGNIFICANTLY_WORSE if difference < 0 else SIGNIFICANTLY_BETTER


@dataclass(frozen=True)
class UnitResult:
    """One unit of a comparison, with its adjusted p-value and verdict."""

    n_before: int
    n_after: int
    passed_before: int
    passed_after: int
    rate_before: float  # %
    rate_after: float
    difference: float  # after − before, percentage points
    p: float  # the unit's own two-sided p-value
    q: float  # Benjamini–Hochberg adjusted over every unit of the comparison
    classification: Classification
    changed: bool  # paired: some repetition's verdict changed; unpaired: the pass rate did
    test: TestName | None  # None: not testable (``reason`` says why)
    reason: str | None


@dataclass(frozen=True)
class Significance:
    """Every unit of one comparison: key -> its result, and how many are what."""

    units: dict[str, UnitResult]
    worse: int  # significantly worse
    better: int  # significantly better
    noise: int  # changed, but not significantly
    unchanged: int  # nothing changed
    alpha: float
    paired: bool
    text: str  # "2 significant regressions, 1 significant fix; 5 changes are within noise ..."


def classify_changes(
    units: Mapping[str, tuple[Sequence[bool], Sequence[bool]]],
    *,
    paired: bool,
    alpha: float = DEFAULT_ALPHA,
) -> Significance:
    """Compare every unit (key -> (outcomes before, outcomes after)), adjust the p-values with
    Benjamini–Hochberg over all of them, and classify each at ``alpha``. Every unit needs an
    outcome on both sides: a case absent from a run is not a unit of the comparison."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    changes: dict[str, tuple[UnitChange, bool]] = {}
    for key, (before, after) in units.items():
        if not before or not after:
            raise ValueError(f"unit {key!r} has no outcomes {'before' if not before else 'after'}")
        changes[key] = (
            compare_outcomes(before, after, paired=paired),
            _changed(before, after, paired),
        )
    q_values = benjamini_hochberg([change.p for change, _ in changes.values()])
    results = {
        key: _unit_result(change, changed, q, alpha)
        for (key, (change, changed)), q in zip(changes.items(), q_values, strict=True)
    }
    classes = [result.classification for result in results.values()]
    worse, better = classes.count(SIGNIFICANTLY_WORSE), classes.count(SIGNIFICANTLY_BETTER)
    noise = sum(1 for r in results.values() if r.changed and r.classification == NO_EVIDENCE)
    return Significance(
        units=results,
        worse=worse,
        better=better,
        noise=noise,
        unchanged=len(results) - worse - better - noise,
        alpha=alpha,
        paired=paired,
        text=significance_text(worse, better, noise, alpha),
    )


def significance_text(worse: int, better: int, noise: int, alpha: float) -> str:
    """``"2 significant regressions, 1 significant fix; 5 changes are within noise
    (BH-adjusted, α = 0.05)"``."""
    if worse or better:
        head = (
            f"{_counted(worse, 'significant regression', 'significant regressions')}, "
            f"{_counted(better, 'significant fix', 'significant fixes')}"
        )
    else:
        head = "no significant regression or fix"
    if noise == 0:
        tail = "no change is within noise"
    elif noise == 1:
        tail = "1 change is within noise"
    else:
        tail = f"{noise} changes are within noise"
    text = f"{head}; {tail} (BH-adjusted, α = {alpha:g})"
    return text[0].upper() + text[1:]


def _unit_result(change: UnitChange, changed: bool, q: float, alpha: float) -> UnitResult:
    # classify_changes refuses empty sides, so the rates and the difference are numbers.
    assert change.rate_before is not None and change.rate_after is not None
    assert change.difference is not None
    # A unit's result is its change (every field of it) with the comparison's verdict.
    verdict = classify(change.difference, q, alpha)
    return UnitResult(**asdict(change), q=q, classification=verdict, changed=changed)


def _changed(before: Sequence[bool], after: Sequence[bool], paired: bool) -> bool:
    if paired and len(before) == len(after):
        return any(bool(b) != bool(a) for b, a in zip(before, after, strict=True))
    return _fraction(before) != _fraction(after)


# --- repetitions of one unit ------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The chance that at least one of k repetitions passes, estimated without bias from n
    repetitions with c passes: 1 − C(n−c, k) / C(n, k) (Chen et al. 2021); None when k > n."""
    _check_counts(n, c, k)
    return None if k > n else 1 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k: the chance that all of k repetitions pass, estimated without bias from n
    repetitions with c passes: C(c, k) / C(n, k) (τ-bench); None when k > n."""
    _check_counts(n, c, k)
    return None if k > n else math.comb(c, k) / math.comb(n, k)


def flaky(outcomes: Sequence[bool]) -> bool:
    """Passed in some repetitions and failed in others of the same group. Pass one group (one
    side of a comparison): a unit that passed every time before and failed every time after
    changed, it is not flaky."""
    return any(outcomes) and not all(outcomes)


def _check_counts(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError("k must be at least 1")
    if not 0 <= c <= n:
        raise ValueError("passes c must be between 0 and the repetitions n")


# --- small helpers ----------------------------------------------------------------------------


def _rate(passed: int, total: int) -> float | None:
    return passed * 100 / total if total else None


def _fraction(outcomes: Sequence[bool]) -> float:
    return sum(map(bool, outcomes)) / len(outcomes)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _missing(what: str, n_before: int, n_after: int) -> str | None:
    if not n_before:
        return f"no {what} before"
    if not n_after:
        return f"no {what} after"
    return None


def _p_value(value: float) -> float:
    """A test's p-value as a float in [0, 1]: NaN (no variation to test) reads as 1.0, and the
    rounding that puts an exact test's sum just above 1 is clipped."""
    p = float(value)
    return 1.0 if math.isnan(p) else min(max(p, 0.0), 1.0)


def _counted(count: int, one: str, many: str) -> str:
    if count == 0:
        return f"no {one}"
    return f"{count} {one if count == 1 else many}"


@dataclass(frozen=True)
class ScoreResult:
    """One unit's scores compared (``compare_scores``), with its adjusted p and verdict."""

    change: ScoreChange
    q: float
    classification: Classification


def classify_score_changes(
    units: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    paired: bool = False,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, ScoreResult]:
    """Each unit's scores before and after compared (Mann–Whitney, or Wilcoxon when
    ``paired``), Benjamini–Hochberg over all of them, classified by the mean's change."""
    changes = {key: compare_scores(old, new, paired=paired) for key, (old, new) in units.items()}
    adjusted = benjamini_hochberg([change.p for change in changes.values()])
    return {
        key: ScoreResult(change, q, classify(change.delta, q, alpha))
        for (key, change), q in zip(changes.items(), adjusted, strict=True)
    }

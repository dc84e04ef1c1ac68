"""Telling a real regression from a coin flip: outcomes drawn with fixed seeds at known pass
probabilities, exact p-values checked against hand-computed ones, the Benjamini–Hochberg
correction, the seeded bootstrap interval of a run's pass-rate difference, pass@k and pass^k."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from runs.core.stats.significance import (
    NO_EVIDENCE,
    SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_WORSE,
    benjamini_hochberg,
    classify,
    classify_changes,
    compare_outcomes,
    compare_scores,
    flaky,
    mcnemar_exact_p,
    pass_at_k,
    pass_hat_k,
    pass_rate_difference,
    significance_text,
)

PASS, FAIL = True, False


def draw(seed: int, rate: float, repetitions: int) -> list[bool]:
    """``repetitions`` outcomes that pass with probability ``rate``."""
    return [bool(x) for x in np.random.default_rng(seed).random(repetitions) < rate]


def outcomes(passed: int, failed: int) -> list[bool]:
    return [PASS] * passed + [FAIL] * failed


def hand_fisher_p(passed_before: int, n_before: int, passed_after: int, n_after: int) -> float:
    """Fisher's two-sided p by hand: the hypergeometric tables with the margins of the observed
    one that are no more likely than it, summed."""
    passed = passed_before + passed_after
    total = n_before + n_after

    def chance(x: int) -> float:
        return math.comb(n_before, x) * math.comb(n_after, passed - x) / math.comb(total, passed)

    observed = chance(passed_before)
    tables = range(max(0, passed - n_after), min(n_before, passed) + 1)
    return sum(chance(x) for x in tables if chance(x) <= observed * (1 + 1e-7))


def hand_bh(p_values: list[float]) -> list[float]:
    """Benjamini–Hochberg by hand: q of the i-th smallest p is min over j >= i of p_j * m / j."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    q = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * m / rank)
        q[index] = running
    return q


# --- real changes and coin flips ------------------------------------------------------------


def test_a_drop_from_90_to_50_percent_over_30_repetitions_is_significant() -> None:
    before, after = draw(1, 0.9, 30), draw(2, 0.5, 30)
    assert (sum(before), sum(after)) == (25, 16)  # what these seeds drew

    change = compare_outcomes(before, after)

    assert change.test == "fisher_exact"
    assert change.difference == pytest.approx(-30.0)
    assert change.p == pytest.approx(hand_fisher_p(25, 30, 16, 30))
    assert change.p == pytest.approx(0.0250584241)
    result = classify_changes({"drop": (before, after)}, paired=False)
    assert result.units["drop"].classification == SIGNIFICANTLY_WORSE
    assert (result.worse, result.better, result.noise, result.unchanged) == (1, 0, 0, 0)


def test_a_paired_drop_from_90_to_50_percent_over_30_repetitions_is_significant() -> None:
    before, after = draw(3, 0.9, 30), draw(4, 0.5, 30)
    assert (sum(before), sum(after)) == (28, 12)
    worse = sum(1 for b, a in zip(before, after, strict=True) if b and not a)
    better = sum(1 for b, a in zip(before, after, strict=True) if a and not b)

    change = compare_outcomes(before, after, paired=True)

    assert change.test == "mcnemar_exact"
    assert change.p == pytest.approx(
        2 * sum(math.comb(worse + better, i) for i in range(better + 1)) / 2 ** (worse + better)
    )
    assert change.p < 0.001
    result = classify_changes({"drop": (before, after)}, paired=True)
    assert result.units["drop"].classification == SIGNIFICANTLY_WORSE


def test_90_percent_against_90_percent_with_different_seeds_is_no_evidence() -> None:
    units = {f"case {i}": (draw(2 * i, 0.9, 30), draw(2 * i + 1, 0.9, 30)) for i in range(40)}

    for paired in (False, True):
        result = classify_changes(units, paired=paired)

        assert {unit.classification for unit in result.units.values()} == {NO_EVIDENCE}
        assert (result.worse, result.better) == (0, 0)
        assert result.noise + result.unchanged == 40
        assert result.noise > 0  # the rates moved a little, by chance


def test_a_rise_from_50_to_90_percent_is_significantly_better() -> None:
    result = classify_changes({"fix": (draw(5, 0.5, 30), draw(6, 0.9, 30))}, paired=False)

    assert result.units["fix"].classification == SIGNIFICANTLY_BETTER
    assert result.units["fix"].difference > 0
    assert (result.worse, result.better) == (0, 1)


# --- exact tests against hand-computed p-values ---------------------------------------------


def test_mcnemar_exact_p_matches_a_hand_computed_binomial() -> None:
    # 8 pairs went pass -> fail and 1 fail -> pass: twice P(X <= 1) for X ~ Binomial(9, 1/2).
    hand = 2 * (math.comb(9, 0) + math.comb(9, 1)) / 2**9
    assert hand == 0.0390625
    assert mcnemar_exact_p(8, 1) == pytest.approx(hand)
    assert mcnemar_exact_p(1, 8) == pytest.approx(hand)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(5, 5) == 1.0  # never above 1


def test_mcnemar_in_compare_outcomes_counts_only_the_pairs_that_changed() -> None:
    # 8 pass -> fail, 1 fail -> pass, 5 pass -> pass and 3 fail -> fail
    before = [PASS] * 8 + [FAIL] + [PASS] * 5 + [FAIL] * 3
    after = [FAIL] * 8 + [PASS] + [PASS] * 5 + [FAIL] * 3

    change = compare_outcomes(before, after, paired=True)

    assert change.p == pytest.approx(0.0390625)
    assert (change.passed_before, change.passed_after) == (13, 6)
    assert change.rate_before == pytest.approx(1300 / 17)
    assert change.difference == pytest.approx(-700 / 17)


def test_fisher_exact_p_matches_a_hand_summed_hypergeometric() -> None:
    for table in ((20, 20, 15, 20), (9, 10, 5, 10), (3, 7, 6, 6), (0, 4, 4, 4)):
        change = compare_outcomes(
            outcomes(table[0], table[1] - table[0]), outcomes(table[2], table[3] - table[2])
        )
        assert change.p == pytest.approx(hand_fisher_p(*table)), table
    assert compare_outcomes(outcomes(20, 0), outcomes(15, 5)).p == pytest.approx(0.047124047124)


def test_paired_sides_of_different_lengths_get_fishers_test() -> None:
    change = compare_outcomes(outcomes(9, 1), outcomes(5, 7), paired=True)

    assert change.test == "fisher_exact"
    assert change.p == pytest.approx(hand_fisher_p(9, 10, 5, 12))


# --- one run per side -----------------------------------------------------------------------


def test_a_single_run_per_side_is_never_significant() -> None:
    for paired in (False, True):
        change = compare_outcomes([PASS], [FAIL], paired=paired)

        assert change.p == 1.0
        assert change.test is None
        assert change.reason is not None and "single run" in change.reason
        assert change.difference == -100.0
    # a thousand cases that all went pass -> fail in one run each: every one is within noise
    result = classify_changes({f"case {i}": ([PASS], [FAIL]) for i in range(1000)}, paired=True)
    assert (result.worse, result.better, result.noise, result.unchanged) == (0, 0, 1000, 0)


def test_one_run_against_many_is_not_tested_either() -> None:
    # Fisher's test alone would give p = 1/31 here.
    change = compare_outcomes([PASS], [FAIL] * 30)

    assert change.p == 1.0
    assert change.test is None


def test_a_side_without_outcomes_has_no_rate_and_is_refused_by_classify_changes() -> None:
    change = compare_outcomes([], [PASS, FAIL])

    assert (change.rate_before, change.rate_after, change.difference) == (None, 50.0, None)
    assert change.reason == "no outcomes before"
    with pytest.raises(ValueError, match="'gone' has no outcomes after"):
        classify_changes({"kept": ([PASS], [PASS]), "gone": ([PASS], [])}, paired=False)


# --- the Benjamini–Hochberg correction ------------------------------------------------------


def test_benjamini_hochberg_matches_hand_computed_q_values() -> None:
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2]) == pytest.approx(
        [0.04, 0.16 / 3, 0.16 / 3, 0.2]
    )
    p_values = [float(p) for p in np.random.default_rng(11).random(200) ** 3]
    assert benjamini_hochberg(p_values) == pytest.approx(hand_bh(p_values))
    assert benjamini_hochberg([]) == []


def test_a_raw_p_just_under_0_05_among_many_null_units_is_not_significant_after_correction() -> (
    None
):
    edge = (outcomes(20, 0), outcomes(15, 5))
    nulls = {f"null {i}": (draw(100 + i, 0.8, 20), draw(200 + i, 0.8, 20)) for i in range(19)}
    units = {"edge": edge, **nulls}

    result = classify_changes(units, paired=False)

    unit = result.units["edge"]
    assert unit.p == pytest.approx(0.047124047124)
    raw = [result.units[key].p for key in units]
    assert [result.units[key].q for key in units] == pytest.approx(
        list(stats.false_discovery_control(raw))
    )
    assert [result.units[key].q for key in units] == pytest.approx(hand_bh(raw))
    assert unit.q > 0.05
    assert unit.classification == NO_EVIDENCE
    assert result.worse == 0
    # alone, the same unit is significant: the correction is what changed the verdict
    alone = classify_changes({"edge": edge}, paired=False).units["edge"]
    assert alone.q == pytest.approx(0.047124047124)
    assert alone.classification == SIGNIFICANTLY_WORSE


def test_the_q_value_of_one_small_p_among_null_units_is_p_times_the_units() -> None:
    units = {"edge": (outcomes(20, 0), outcomes(15, 5))}
    units |= {f"same {i}": (outcomes(5, 5), outcomes(5, 5)) for i in range(9)}

    result = classify_changes(units, paired=False)

    assert result.units["edge"].q == pytest.approx(0.047124047124 * 10)
    assert result.units["same 0"].q == 1.0


def test_alpha_is_a_parameter() -> None:
    units = {"edge": (outcomes(20, 0), outcomes(15, 5))}

    assert classify_changes(units, paired=False).worse == 1
    assert classify_changes(units, paired=False, alpha=0.01).worse == 0
    assert classify(-10.0, 0.04, alpha=0.05) == SIGNIFICANTLY_WORSE
    assert classify(10.0, 0.04, alpha=0.05) == SIGNIFICANTLY_BETTER
    assert classify(0.0, 0.0, alpha=0.05) == NO_EVIDENCE
    assert classify(-10.0, 0.06, alpha=0.05) == NO_EVIDENCE
    with pytest.raises(ValueError, match="alpha"):
        classify_changes(units, paired=False, alpha=0)


# --- counting and the sentence --------------------------------------------------------------


def test_classify_changes_counts_regressions_fixes_noise_and_unchanged_units() -> None:
    units = {
        "drop 1": (outcomes(30, 0), outcomes(10, 20)),
        "drop 2": (outcomes(29, 1), outcomes(12, 18)),
        "rise": (outcomes(5, 25), outcomes(28, 2)),
        "wobble 1": (outcomes(27, 3), outcomes(25, 5)),
        "wobble 2": (outcomes(15, 15), outcomes(17, 13)),
        "wobble 3": ([PASS], [FAIL]),
        "same 1": (outcomes(30, 0), outcomes(30, 0)),
        "same 2": (outcomes(12, 18), outcomes(12, 18)),
    }

    result = classify_changes(units, paired=False)

    assert (result.worse, result.better, result.noise, result.unchanged) == (2, 1, 3, 2)
    assert result.text == (
        "2 significant regressions, 1 significant fix; 3 changes are within noise "
        "(BH-adjusted, α = 0.05)"
    )
    assert result.units["same 1"].classification == NO_EVIDENCE
    assert not result.units["same 1"].changed
    assert result.units["wobble 3"].changed
    assert (result.units["drop 1"].n_before, result.units["drop 1"].n_after) == (30, 30)


def test_a_reordered_unit_is_a_change_only_when_paired() -> None:
    units = {"swap": ([PASS, FAIL, PASS, FAIL], [FAIL, PASS, FAIL, PASS])}

    unpaired = classify_changes(units, paired=False)
    paired = classify_changes(units, paired=True)

    assert (unpaired.noise, unpaired.unchanged) == (0, 1)
    assert (paired.noise, paired.unchanged) == (1, 0)
    assert paired.units["swap"].p == pytest.approx(mcnemar_exact_p(2, 2))


def test_the_sentence_reads_for_none_and_one() -> None:
    assert significance_text(0, 0, 0, 0.05) == (
        "No significant regression or fix; no change is within noise (BH-adjusted, α = 0.05)"
    )
    assert significance_text(1, 0, 1, 0.1) == (
        "1 significant regression, no significant fix; 1 change is within noise "
        "(BH-adjusted, α = 0.1)"
    )


# --- scores ---------------------------------------------------------------------------------


def test_wilcoxon_with_every_difference_zero_gives_p_1_without_raising() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        change = compare_scores([0.5, 0.7, 0.7], [0.5, 0.7, 0.7], paired=True)

    assert change.p == 1.0
    assert change.test == "wilcoxon"
    assert change.delta == 0.0
    assert change.reason == "every paired difference is zero"


def test_wilcoxon_p_matches_the_exact_signed_rank_distribution() -> None:
    before = [0.1, 0.2, 0.3, 0.4, 0.5]
    after = [0.15, 0.3, 0.45, 0.6, 0.75]  # all 5 differences up, ranks distinct

    change = compare_scores(before, after, paired=True)

    assert change.p == pytest.approx(2 / 2**5)  # only the all-positive signs are as extreme
    assert change.mean_before == pytest.approx(0.3)
    assert change.mean_after == pytest.approx(0.45)
    assert change.delta == pytest.approx(0.15)


def test_mann_whitney_p_of_two_separated_groups_is_two_over_the_arrangements() -> None:
    change = compare_scores([0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0])

    assert change.test == "mann_whitney_u"
    assert change.p == pytest.approx(2 / math.comb(10, 5))


def test_equal_scores_unpaired_give_p_1() -> None:
    change = compare_scores([0.8, 0.8], [0.8, 0.8, 0.8])

    assert change.p == 1.0
    assert change.reason == "every score is the same"


def test_fewer_than_two_scores_a_side_are_not_testable() -> None:
    for before, after in (([0.9], [0.1, 0.2]), ([0.9, 0.8], [0.1]), ([], [0.1, 0.2])):
        change = compare_scores(before, after, paired=True)

        assert change.p == 1.0
        assert change.test is None
        assert change.reason
    assert compare_scores([], [0.2, 0.4]).mean_before is None
    with pytest.raises(ValueError, match="finite"):
        compare_scores([0.5, float("nan")], [0.5, 0.5])


# --- the run's headline ---------------------------------------------------------------------


Run = dict[str, list[bool]]


def simulated_runs(seed: int, cases: int, drop: float) -> tuple[Run, Run]:
    """Cases whose pass probability is uniform in 0.5..1 before and ``drop`` lower after, 10
    repetitions a side."""
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.5, 1.0, size=cases)
    before = {f"case {i}": [bool(x) for x in rng.random(10) < rate] for i, rate in enumerate(rates)}
    after = {
        f"case {i}": [bool(x) for x in rng.random(10) < rate - drop] for i, rate in enumerate(rates)
    }
    return before, after


def test_the_bootstrap_interval_is_the_same_for_the_same_seed() -> None:
    before, after = simulated_runs(21, 133, 0.05)

    first = pass_rate_difference(before, after, seed=7)
    again = pass_rate_difference(dict(reversed(before.items())), after, seed=7)
    other = pass_rate_difference(before, after, seed=8)

    assert first == again
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    assert first.difference == other.difference
    assert (first.n_resamples, first.seed, first.confidence) == (10_000, 7, 0.95)


def test_the_bootstrap_interval_covers_the_true_difference_in_a_simulated_run() -> None:
    before, after = simulated_runs(31, 133, 0.15)

    headline = pass_rate_difference(before, after)

    assert headline.cases == 133
    assert headline.ci_low is not None and headline.ci_high is not None
    assert headline.difference is not None
    assert headline.ci_low < -15.0 < headline.ci_high
    assert headline.ci_high < 0  # and it is a real drop
    assert headline.ci_low < headline.difference < headline.ci_high
    assert headline.p is None  # repeated outcomes: no McNemar over cases


def test_the_95_percent_interval_covers_the_truth_in_about_95_percent_of_simulated_runs() -> None:
    covered = 0
    for seed in range(100):
        before, after = simulated_runs(1000 + seed, 60, 0.1)
        headline = pass_rate_difference(before, after, n_resamples=1000, seed=seed)
        assert headline.ci_low is not None and headline.ci_high is not None
        covered += headline.ci_low <= -10.0 <= headline.ci_high
    assert 88 <= covered <= 99


def test_each_case_counts_its_pass_rate_once_and_only_shared_cases_count() -> None:
    before = {"a": outcomes(4, 0), "b": [FAIL], "only before": [PASS]}
    after = {"a": outcomes(1, 3), "b": [PASS], "only after": [FAIL]}

    headline = pass_rate_difference(before, after)

    assert headline.cases == 2
    assert headline.rate_before == pytest.approx(50.0)
    assert headline.rate_after == pytest.approx(62.5)
    assert headline.difference == pytest.approx(12.5)  # (−75 + 100) / 2


def test_one_outcome_per_case_gets_mcnemars_p_over_cases() -> None:
    before = {f"case {i}": [PASS] for i in range(20)} | {f"other {i}": [FAIL] for i in range(5)}
    after = {f"case {i}": [i >= 8] for i in range(20)} | {f"other {i}": [i < 1] for i in range(5)}

    headline = pass_rate_difference(before, after)

    assert headline.p == pytest.approx(0.0390625)  # 8 cases pass -> fail, 1 fail -> pass
    assert headline.difference == pytest.approx(-28.0)


def test_no_shared_case_or_one_gives_no_interval() -> None:
    nothing = pass_rate_difference({"a": [PASS]}, {"b": [PASS]})
    one = pass_rate_difference({"a": [PASS, PASS]}, {"a": [PASS, FAIL]})

    assert (nothing.cases, nothing.difference, nothing.ci_low, nothing.p) == (0, None, None, None)
    assert (one.cases, one.difference, one.ci_low, one.ci_high) == (1, -50.0, None, None)


# --- repetitions ----------------------------------------------------------------------------


def test_pass_at_k_and_pass_hat_k_match_small_hand_computed_values() -> None:
    # n = 5 repetitions, c = 2 passes, k = 2: C(3, 2) / C(5, 2) = 3/10 of pairs fail both
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)  # C(2, 2) / C(5, 2)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4) == pass_hat_k(5, 2, 1)
    assert pass_hat_k(10, 9, 3) == pytest.approx(84 / 120)
    assert pass_at_k(10, 9, 3) == 1.0  # one failure cannot fill 3 draws
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_at_k(3, 1, 4) is None
    assert pass_hat_k(3, 1, 4) is None
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 0)


def test_flaky_is_only_within_a_group() -> None:
    assert flaky([PASS, FAIL, PASS])
    assert not flaky([PASS, PASS, PASS])
    assert not flaky([FAIL, FAIL])
    assert not flaky([])
    before, after = [PASS] * 5, [FAIL] * 5  # changed between groups, steady within each
    assert not flaky(before)
    assert not flaky(after)
    assert flaky(before + after)  # which is why a caller passes one group

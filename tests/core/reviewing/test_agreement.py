"""How a metric agrees with people (runs.core.reviewing.agreement): the confusion matrix from a
turn's human verdict read as each metric's, raw agreement, Cohen's kappa and its interval
checked by hand and against statsmodels' own result, the disagreements, the best-agreeing
threshold."""

from __future__ import annotations

import math
from itertools import count

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

from runs.core.reviewing.agreement import (
    Confusion,
    Judged,
    agreement_of,
    best_threshold,
    cohens_kappa,
    kappa_reading,
)
from runs.core.reviewing.vocabulary import HumanVerdict

AGREES = HumanVerdict.AGREES.value
SHOULD_PASS = HumanVerdict.SHOULD_PASS.value
SHOULD_FAIL = HumanVerdict.SHOULD_FAIL.value
UNSURE = HumanVerdict.UNSURE.value

_ids = count(1)


def judged(
    outcome: str, verdict: str, score: float | None = None, threshold: float = 0.5
) -> Judged:
    return Judged(next(_ids), outcome, verdict, score, threshold)


def fixture_turns() -> list[Judged]:
    """50 compared turns: 20 both pass, 5 the metric passed where people say fail, 10 it
    failed where people say pass, 15 both fail; and 3 left out (2 unsure, 1 not graded)."""
    return (
        [judged("passed", AGREES) for _ in range(20)]
        + [judged("passed", SHOULD_FAIL) for _ in range(5)]
        + [judged("failed", SHOULD_PASS) for _ in range(10)]
        + [judged("failed", AGREES) for _ in range(15)]
        + [judged("passed", UNSURE), judged("failed", UNSURE), judged("error", SHOULD_PASS)]
    )


def test_kappa_and_its_interval_agree_with_the_hand_computation_and_statsmodels() -> None:
    """The table, rows the metric, columns people (pass, fail), n = 50:

        [[20,  5],
         [10, 15]]

    Observed agreement  po = (20 + 15) / 50 = 0.70.
    Margins: the metric passes 25/50 = 0.5, fails 0.5; people pass 30/50 = 0.6, fail 0.4.
    Chance agreement    pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.30 + 0.20 = 0.50.
    Kappa                κ = (po - pe) / (1 - pe) = (0.70 - 0.50) / 0.50 = 0.40.

    Its asymptotic variance (Fleiss, Cohen and Everitt 1969, what statsmodels computes), with
    cell proportions p11 = .4, p12 = .1, p21 = .2, p22 = .3 and 1 - κ = .6:
      A = Σ p_ii (1 - (p_i. + p_.i)(1 - κ))²
        = .4 (1 - 1.1 · .6)² + .3 (1 - .9 · .6)² = .04624 + .06348 = .10972
      B = (1 - κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²
        = .36 (.1 · (.6 + .5)² + .2 · (.4 + .5)²) = .36 · .283 = .10188
      C = (κ - pe (1 - κ))² = (.4 - .3)² = .01
      var = (A + B - C) / (n (1 - pe)²) = .2016 / 12.5 = .016128, ASE = .126996
    95 % interval: .4 ± 1.959964 · .126996 = .4 ± .248907 = [.151093, .648907].
    """
    agreement = agreement_of("correctness", fixture_turns(), ["geval"])

    assert agreement.confusion == Confusion(both_pass=20, false_pass=5, false_fail=10, both_fail=15)
    assert agreement.confusion.table == [[20, 5], [10, 15]]
    assert (agreement.n, agreement.agreed, agreement.rate) == (50, 35, 0.7)
    assert (agreement.unsure, agreement.not_graded) == (2, 1)

    po, pe = 35 / 50, (25 * 30 + 25 * 20) / 50**2
    assert (po, pe) == (0.7, 0.5)
    assert agreement.kappa is not None
    assert agreement.kappa.value == pytest.approx((po - pe) / (1 - pe)) == pytest.approx(0.4)
    ase = math.sqrt((0.10972 + 0.10188 - 0.01) / (50 * (1 - pe) ** 2))
    assert ase == pytest.approx(0.126996, abs=1e-6)
    assert agreement.kappa.low == pytest.approx(0.4 - 1.959964 * ase, abs=1e-6)
    assert agreement.kappa.high == pytest.approx(0.4 + 1.959964 * ase, abs=1e-6)
    assert agreement.kappa.confidence == 0.95

    # The library's own result, to the last bit.
    own = statsmodels_kappa(np.array([[20, 5], [10, 15]]), return_results=True)
    assert (agreement.kappa.value, agreement.kappa.low, agreement.kappa.high) == (
        own.kappa,
        own.kappa_low,
        own.kappa_upp,
    )
    assert agreement.summary == "people agree 35/50, κ 0.40"
    assert kappa_reading(agreement.kappa.value) == "fair"


@pytest.mark.parametrize(
    "table",
    [[[7, 1], [2, 5]], [[1, 0], [0, 1]], [[30, 12], [3, 2]], [[4, 6], [6, 4]], [[9, 0], [3, 0]]],
)
def test_kappa_is_statsmodels_own_for_any_table(table: list[list[int]]) -> None:
    confusion = Confusion(table[0][0], table[0][1], table[1][0], table[1][1])
    kappa = cohens_kappa(confusion)
    with np.errstate(all="ignore"):  # its test of kappa = 0 divides by 0 for [[9, 0], [3, 0]]
        own = statsmodels_kappa(np.array(table), return_results=True)
    assert kappa is not None
    assert (kappa.value, kappa.low, kappa.high) == pytest.approx(
        (own.kappa, own.kappa_low, own.kappa_upp)
    )


def test_kappa_is_undefined_without_a_pair_or_when_everyone_says_the_same() -> None:
    assert cohens_kappa(Confusion()) is None
    assert cohens_kappa(Confusion(both_pass=6)) is None  # pe = 1: 0 / 0
    nothing = agreement_of("m", [judged("passed", UNSURE)])
    assert (nothing.n, nothing.rate, nothing.kappa, nothing.best) == (0, None, None, None)
    assert nothing.summary == "no reviewed turn"
    assert kappa_reading(None) == "undefined"


def test_a_turn_verdict_reads_as_each_metrics_verdict() -> None:
    """ "Agrees" agrees with the metric whatever it said; "should have passed" says a failing
    metric was wrong and a passing one right; "should have failed" the other way round."""
    assert judged("passed", AGREES).human_passed is True
    assert judged("failed", AGREES).human_passed is False
    assert judged("failed", SHOULD_PASS).human_passed is True
    assert judged("passed", SHOULD_PASS).human_passed is True
    assert judged("passed", SHOULD_FAIL).human_passed is False
    assert judged("failed", UNSURE).human_passed is None
    for outcome in ("error", "not_graded", "skipped"):
        assert judged(outcome, SHOULD_PASS).machine_passed is None


def test_the_disagreements_are_the_turns_where_metric_and_people_differ() -> None:
    right = judged("failed", AGREES, 0.2)
    too_strict = judged("failed", SHOULD_PASS, 0.45)
    too_lenient = judged("passed", SHOULD_FAIL, 0.6)
    agreement = agreement_of("m", [right, too_strict, too_lenient])
    assert [
        (d.turn_id, d.machine_passed, d.human_passed, d.score) for d in agreement.disagreements
    ] == [
        (too_strict.turn_id, False, True, 0.45),
        (too_lenient.turn_id, True, False, 0.6),
    ]


def test_the_best_threshold_is_the_score_that_agrees_with_people_on_most_turns() -> None:
    turns = [
        judged("passed", AGREES, 0.9),
        judged("passed", AGREES, 0.8),
        judged("passed", AGREES, 0.7),
        judged("passed", SHOULD_FAIL, 0.6),
        judged("passed", SHOULD_FAIL, 0.55),
        judged("failed", AGREES, 0.3),
    ]
    agreement = agreement_of("m", turns)
    best = agreement.best
    assert best is not None
    assert (best.threshold, best.agreed, best.total) == (0.7, 6, 6)
    assert (best.current_agreed, best.current_threshold, best.gains) == (4, 0.5, 2)
    assert agreement.threshold == 0.5  # shown beside it, never changed


def test_a_tie_goes_to_the_threshold_nearest_the_current_one() -> None:
    # At 0.3 and at 0.9 the metric would agree on 2 of 3 turns (at 0.6 on 1): 0.3 is nearer
    # the current 0.5.
    turns = [
        judged("passed", AGREES, 0.9, threshold=0.5),
        judged("passed", SHOULD_FAIL, 0.6, threshold=0.5),
        judged("failed", SHOULD_PASS, 0.3, threshold=0.5),
    ]
    pairs = [(turn, bool(turn.human_passed)) for turn in turns]
    best = best_threshold(pairs)
    assert best is not None and (best.threshold, best.agreed) == (0.3, 2)


def test_unscored_turns_leave_no_best_threshold() -> None:
    agreement = agreement_of("tool_check", [judged("passed", AGREES), judged("failed", AGREES)])
    assert agreement.best is None and agreement.threshold == 0.5

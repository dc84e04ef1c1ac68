"""Significance between runs, from their repetitions (seeded fake agents whose turns pass with
known probabilities): a real drop is flagged, a coin flip is not, and the gate with
``--significant-only`` fails only on the former."""

from __future__ import annotations

import pytest

from runs.compare.gate import gate_evaluate
from runs.compare.reads.comparison import Baseline
from runs.core.stats.significance import NO_EVIDENCE, SIGNIFICANTLY_WORSE
from runs.core.writers.gate_markdown import GateOptions
from runs.models import AgentProject
from runs.selectors.significance import runs_significance, same_commit_runs, turn_key
from tests.web.factories import repeated_run

pytestmark = pytest.mark.django_db

STEADY = [0.9] * 9  # cases that keep passing 90 % of the time


def test_a_drop_from_90_to_50_percent_over_30_repetitions_is_significant(
    project: AgentProject,
) -> None:
    before = repeated_run(project, [0.9, *STEADY], repeats=30, seed=1, exact=True)
    after = repeated_run(project, [0.5, *STEADY], repeats=30, seed=2, commit="b" * 40, exact=True)
    found = runs_significance([before], [after])
    drop = found.turns.units[turn_key("case 0", 0)]
    assert (drop.passed_before, drop.passed_after) == (27, 15)
    assert drop.classification == SIGNIFICANTLY_WORSE
    assert drop.p < drop.q <= 0.05  # Benjamini-Hochberg raised it over the 10 turns tested
    assert found.cases.units["case 0"].classification == SIGNIFICANTLY_WORSE
    assert found.turns.worse == 1 and found.turns.better == 0
    steady = [unit for key, unit in found.turns.units.items() if key != turn_key("case 0", 0)]
    assert all(unit.classification == NO_EVIDENCE for unit in steady)
    assert found.pass_rate.difference is not None and found.pass_rate.difference < 0
    low, high = found.pass_rate.ci_low, found.pass_rate.ci_high
    assert low is not None and high is not None and low < found.pass_rate.difference <= high <= 0


def test_the_correction_keeps_a_borderline_drop_among_many_cases_from_being_significant(
    project: AgentProject,
) -> None:
    # Alone, 25/30 against 16/30 would be significant at 5 % (p = 0.025); among 10 tested
    # turns its adjusted p is 0.25.
    before = repeated_run(project, [0.9, *STEADY], repeats=30, seed=1)
    after = repeated_run(project, [0.5, *STEADY], repeats=30, seed=2, commit="b" * 40)
    found = runs_significance([before], [after])
    drop = found.turns.units[turn_key("case 0", 0)]
    assert (drop.passed_before, drop.passed_after) == (25, 16)
    assert drop.p < 0.05 < drop.q
    assert drop.classification == NO_EVIDENCE and found.turns.worse == 0


def test_90_against_90_percent_is_no_evidence_of_change(project: AgentProject) -> None:
    before = repeated_run(project, [0.9, *STEADY], repeats=30, seed=3)
    after = repeated_run(project, [0.9, *STEADY], repeats=30, seed=4, commit="b" * 40)
    found = runs_significance([before], [after])
    assert found.turns.worse == found.turns.better == 0
    # Verdicts did flip from one run to the other, by chance: that is the noise.
    assert found.turns.noise > 0


def test_one_run_a_side_without_repeats_is_never_significant(project: AgentProject) -> None:
    before = repeated_run(project, [1.0] * 5, repeats=1, seed=5)
    after = repeated_run(project, [0.0] * 5, repeats=1, seed=6, commit="b" * 40)
    found = runs_significance([before], [after])
    assert found.turns.worse == 0 and found.turns.noise == 5
    assert all(unit.reason for unit in found.turns.units.values())


def test_several_runs_of_one_commit_are_one_side(project: AgentProject) -> None:
    first = repeated_run(project, [0.95] * 3, repeats=5, seed=7)
    repeated_run(project, [0.95] * 3, repeats=5, seed=8, minutes=1)
    repeated_run(project, [0.95] * 3, repeats=5, seed=9, commit="b" * 40, minutes=2)
    side = same_commit_runs(first)
    assert side[0].pk == first.pk and len(side) == 2


def test_the_gate_with_significant_only_fails_on_a_real_drop_and_not_on_noise(
    project: AgentProject,
) -> None:
    base = repeated_run(project, [0.9, *STEADY], repeats=30, seed=1, exact=True)
    dropped = repeated_run(project, [0.5, *STEADY], repeats=30, seed=2, commit="b" * 40, exact=True)
    options = GateOptions(significant_only=True)
    failed = gate_evaluate(dropped, Baseline(base, "chosen by you", added=True), options)
    assert not failed.passed
    assert failed.significance is not None and failed.significance.worse == 1
    assert "1 significantly regressed turn" in failed.reasons[0]
    assert "**Significance**" in failed.markdown and "within noise" in failed.markdown

    # Coin flips: cases that pass 55 % of the time. A case's merged verdict is its repetitions'
    # majority, so by chance some cases go from passing (16/30) to failing (15/30 or fewer).
    coins = repeated_run(project, [0.55] * 10, repeats=30, seed=31, exact=True)
    flipped = repeated_run(project, [0.55] * 10, repeats=30, seed=32, commit="c" * 40)
    plain = gate_evaluate(flipped, Baseline(coins, "chosen by you", added=True), GateOptions())
    assert not plain.passed and plain.regressions > 0  # without the option it fails
    passed = gate_evaluate(flipped, Baseline(coins, "chosen by you", added=True), options)
    assert passed.passed, passed.reasons
    assert passed.significance is not None and passed.significance.worse == 0
    assert passed.significance.noise >= plain.regressions


def test_the_gate_with_significant_only_lists_the_significant_turns_and_the_noise_apart(
    project: AgentProject,
) -> None:
    base = repeated_run(project, [0.9, *STEADY], repeats=30, seed=1, exact=True)
    dropped = repeated_run(project, [0.5, *STEADY], repeats=30, seed=2, commit="b" * 40, exact=True)
    options = GateOptions(significant_only=True, base_url="https://holodeck.example")
    result = gate_evaluate(dropped, Baseline(base, "chosen by you", added=True), options)

    found = result.significance
    assert found is not None and found.worse == 1
    assert [(case.key, case.turns) for case in found.regressed] == [("case 0", [0])]
    assert found.regressed[0].url.endswith("&key=case+0#turn-1")  # turn 1, from 1
    assert "### Significant regressions (1 case, 1 turn)" in result.markdown
    assert "| case 0 | 1 | turn 1 |" in result.markdown

    # Coin flips: every change is within noise, and listed apart, none as a regression.
    coins = repeated_run(project, [0.55] * 10, repeats=30, seed=31, exact=True)
    flipped = repeated_run(project, [0.55] * 10, repeats=30, seed=32, commit="c" * 40)
    result = gate_evaluate(flipped, Baseline(coins, "chosen by you", added=True), options)
    found = result.significance
    assert found is not None and found.worse == 0 and found.regressed == ()
    assert len(found.noise_turns) == found.noise > 0
    text = result.markdown
    assert "### Significant regressions" not in text and "### Regressed cases" not in text
    noise = text.split(f"### Changes within noise ({found.noise} turn")[1]
    for turn in found.noise_turns:
        before = f"{turn.passed_before} of {turn.n_before}"
        after = f"{turn.passed_after} of {turn.n_after}"
        assert f"| {turn.key} | turn {turn.turn + 1} | {before} | {after} |" in noise

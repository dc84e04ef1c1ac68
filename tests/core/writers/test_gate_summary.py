"""The CI gate's Markdown summary from a plain result: no database, no Django."""

from __future__ import annotations

from runs.core.verdicts.summary import MetricSummary, OutcomeCounts, RunSummary
from runs.core.writers.gate_markdown import (
    GateOptions,
    GateResult,
    GateRun,
    GateSignificance,
    MetricChange,
    NoisyTurn,
    RegressedCase,
    gate_markdown,
)

URL = "https://holodeck.example"


def summary(passed: int, failed: int, not_graded: int = 0) -> RunSummary:
    cases = OutcomeCounts(
        total=passed + failed + not_graded, passed=passed, failed=failed, not_graded=not_graded
    )
    turns = OutcomeCounts(total=2 * cases.total, passed=2 * passed, failed=2 * failed)
    return RunSummary(cases=cases, turns=turns, metrics=[])


def gate_run(run_id: int, *, branch: str = "main", cases: RunSummary | None = None) -> GateRun:
    return GateRun(
        id=run_id,
        agent_name="convfinqa-analyst",
        status="failed",
        git_commit="3f2a9c1d0b7e4f6a",
        git_branch=branch,
        summary=cases or summary(3, 1),
    )


def result(**changes: object) -> GateResult:
    values: dict[str, object] = {
        "passed": False,
        "reasons": ["1 regressed turn (at most 0 allowed)"],
        "run": gate_run(2, branch="fix_*tables*", cases=summary(2, 2)),
        "baseline": gate_run(1),
        "baseline_rule": "chosen by you",
        "regressions": 1,
        "fixes": 0,
        "regressed": [RegressedCase("rev | 2009", [1], f"{URL}/compare/case/?key=x#turn-2")],
        "metric_changes": [
            MetricChange(
                "rouge",
                "standard",
                0.8,
                0.7,
                0.05,
                MetricSummary(
                    name="rouge",
                    kind="standard",
                    evaluated=8,
                    passed=6,
                    failed=1,
                    not_graded=1,
                    average=0.7,
                ),
            )
        ],
        "compare_url": f"{URL}/compare/?runs=1,2",
    }
    values.update(changes)
    return GateResult(**values)  # type: ignore[arg-type]


def test_a_failed_gate_says_why_which_cases_regressed_and_which_metrics_dropped() -> None:
    text = gate_markdown(result(), GateOptions(base_url=URL))

    assert text.startswith("## ❌ HoloDeck gate failed: convfinqa-analyst\n")
    assert f"[#2]({URL}/runs/2/) (`3f2a9c1d` on fix\\_\\*tables\\*)" in text
    assert "| pass rate | 50% | 75% | -25 pts |" in text
    assert "| cases passed | 2 | 3 | -1 |" in text
    assert "| cases failed | 2 | 1 | +1 |" in text
    assert "| cases errored | 0 | 0 | +0 |" in text
    assert "| turns passed | 4 | 6 | -2 |" in text
    assert "- 1 regressed turn (at most 0 allowed)" in text
    # a case name cannot break the table; turns numbered from 1
    assert "| rev \\| 2009 | 1 | turn 2 |" in text
    assert "(https://holodeck.example/compare/case/?key=x#turn-2)" in text
    assert "### Metric drops (1, counted per turn)" in text
    assert "| rouge ❌ | standard | 8 | 6 | 1 | 1 | 0.70 | 0.80 | -0.100 | 0.05 |" in text
    assert text.endswith(f"[Full comparison]({URL}/compare/?runs=1,2)\n")


def test_a_passed_gate_has_no_reasons_and_no_regressed_cases() -> None:
    text = gate_markdown(
        result(passed=True, reasons=[], regressions=0, regressed=[], metric_changes=[]),
        GateOptions(base_url=URL, kinds=("code",)),
    )

    assert text.startswith("## ✅ HoloDeck gate passed")
    assert "Regressions and metrics counted for code only." in text
    assert "Failed because" not in text and "Regressed cases" not in text


def test_a_run_with_nothing_graded_reads_a_dash_for_its_pass_rate_never_0_percent() -> None:
    nothing = gate_run(2, cases=summary(0, 0, not_graded=4))
    text = gate_markdown(result(run=nothing), GateOptions(base_url=URL))

    assert "| pass rate | – | 75% |  |" in text
    assert "| cases not graded | 4 | 0 | +4 |" in text


def test_a_risen_metric_is_never_listed_under_metric_drops() -> None:
    risen = MetricChange("tone", "geval", 0.5, 0.9, None)
    same = MetricChange("bleu", "standard", 0.4, 0.4, None)
    dropped = MetricChange("rouge", "standard", 0.8, 0.7, None)
    text = gate_markdown(result(metric_changes=[dropped, risen, same]), GateOptions(base_url=URL))

    drops, others = text.split("### Metric drops (1, counted per turn)")[1].split(
        "### Other metrics (risen, unchanged or new; counted per turn)"
    )
    assert "| rouge |" in drops
    assert "| tone |" not in drops and "| bleu |" not in drops
    assert "| tone | geval |" in others and "+0.400" in others
    assert "| bleu | standard |" in others


def test_with_no_drop_there_is_no_metric_drops_heading() -> None:
    risen = MetricChange("tone", "geval", 0.5, 0.9, None)
    text = gate_markdown(result(metric_changes=[risen]), GateOptions(base_url=URL))

    assert "Metric drops" not in text
    assert "### Other metrics (risen, unchanged or new; counted per turn)" in text


def test_the_regressed_turns_column_counts_turns_and_adds_up_to_the_headline() -> None:
    """Turn numbers in a count column read as counts: "2" and "1" read as 3 regressions when
    the headline says 2. The count and the turns it counts are columns of their own."""
    cases = [
        RegressedCase("refund", [1], f"{URL}/a"),
        RegressedCase("balance", [0], f"{URL}/b"),
    ]
    text = gate_markdown(result(regressions=2, regressed=cases), GateOptions(base_url=URL))

    assert "| regressed turns | 2 | | |" in text
    assert "### Regressed cases (2 cases, 2 turns)" in text
    assert "| case | regressed turns (count) | which turns | side by side |" in text
    assert "| refund | 1 | turn 2 | [compare](https://holodeck.example/a) |" in text
    assert "| balance | 1 | turn 1 | [compare](https://holodeck.example/b) |" in text
    assert "| total | 2 | | |" in text


def test_a_case_with_several_regressed_turns_counts_each_and_names_them() -> None:
    cases = [RegressedCase("refund", [0, 2], f"{URL}/a")]
    text = gate_markdown(result(regressions=2, regressed=cases), GateOptions(base_url=URL))

    assert "| refund | 2 | turn 1, turn 3 |" in text


def test_an_unchanged_metric_never_reads_a_negative_zero() -> None:
    same = MetricChange("bleu", "standard", 0.4, 0.4, None)
    text = gate_markdown(result(metric_changes=[same]), GateOptions(base_url=URL))

    assert "-0.000" not in text
    assert "| bleu | standard | – | – | – | – | 0.40 | 0.40 | +0.000 |  |" in text


def significance(**changes: object) -> GateSignificance:
    values: dict[str, object] = {
        "worse": 1,
        "better": 0,
        "noise": 2,
        "text": "1 significant regression, 0 significant fixes; 2 changes are within noise",
        "difference": -5.0,
        "ci_low": -9.0,
        "ci_high": -1.0,
        "confidence": 0.95,
        "before_runs": (1,),
        "after_runs": (2,),
        "regressed": (RegressedCase("refund", [0], f"{URL}/refund"),),
        "noise_turns": (
            NoisyTurn("balance", 1, 16, 30, 14, 30, f"{URL}/balance"),
            NoisyTurn("totals", 0, 20, 30, 21, 30, f"{URL}/totals"),
        ),
    }
    values.update(changes)
    return GateSignificance(**values)  # type: ignore[arg-type]


def test_significant_only_lists_the_significant_regressions_and_the_noise_apart() -> None:
    """The plain regressed cases (significant or not, unmarked) are not the table: the
    significantly regressed turns are, and the changes within noise have a section of their
    own."""
    noisy = [
        RegressedCase("refund", [0], f"{URL}/refund"),
        RegressedCase("balance", [1], f"{URL}/balance"),
    ]
    text = gate_markdown(
        result(regressions=2, regressed=noisy, significance=significance()),
        GateOptions(base_url=URL, significant_only=True),
    )

    assert "### Regressed cases" not in text
    significant, noise = text.split("### Significant regressions (1 case, 1 turn)")[1].split(
        "### Changes within noise (2 turns; not significant, not counted as regressions)"
    )
    assert "| case | significantly regressed turns (count) | which turns | side by side |" in (
        significant
    )
    assert "| refund | 1 | turn 1 | [compare](https://holodeck.example/refund) |" in significant
    assert "balance" not in significant
    assert "| balance | turn 2 | 16 of 30 | 14 of 30 | -6.7 pts |" in noise
    assert "| totals | turn 1 | 20 of 30 | 21 of 30 | +3.3 pts |" in noise
    assert "| regressed turns (all) | 2 | | |" in text
    assert "| significantly regressed turns | 1 | | |" in text
    assert "| changes within noise | 2 | | |" in text


def test_significant_only_without_a_significant_regression_has_no_such_table() -> None:
    text = gate_markdown(
        result(significance=significance(worse=0, regressed=())),
        GateOptions(base_url=URL, significant_only=True),
    )

    assert "### Significant regressions" not in text
    assert "### Changes within noise (2 turns;" in text

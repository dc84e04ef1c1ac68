"""The trends chart from plain runs: no database, no Django."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from runs.core.charts.trend_chart import CHURN_HEIGHT, REGRADE_SHIFT_MAX, chart
from runs.core.charts.trend_runs import (
    RunChurn,
    TrendRun,
    changes,
    drops,
    point_title,
    regrades_placed,
    split_regrades,
)
from runs.core.commit_order import commit_ordered
from runs.core.verdicts.summary import OutcomeCounts

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def trend_run(
    run_id: int,
    *,
    rate: float | None = 100.0,
    commit: str = "",
    prompt: str = "v1",
    model: str = "gpt-4o",
    day: int | None = None,
) -> TrendRun:
    return TrendRun(
        id=run_id,
        status="passed",
        agent_name="agent",
        commit=commit,
        branch="main",
        dirty=False,
        prompt_version=prompt,
        model=model,
        provider="openai",
        pass_rate=rate,
        created_at=START + timedelta(days=run_id if day is None else day),
    )


def test_a_drop_beyond_the_margin_is_called_out_against_the_previous_rated_run() -> None:
    runs = [trend_run(1, rate=90), trend_run(2, rate=None), trend_run(3, rate=70)]

    found = drops(runs, margin=10)

    assert [(index, previous.id, drop) for index, previous, drop in found] == [(2, 1, 20)]
    assert drops(runs, margin=20) == []


def test_a_new_prompt_version_or_model_is_marked_at_the_run_that_changed_it() -> None:
    runs = [trend_run(1), trend_run(2, prompt="v2"), trend_run(3, prompt="v2", model="o3")]

    assert [(index, label) for index, label, _ in changes(runs)] == [(1, "v2"), (2, "o3")]


def test_runs_on_the_history_go_by_commit_and_the_others_merge_in_by_date() -> None:
    history = ["a" * 40, "b" * 40, "c" * 40]
    late_first_commit = trend_run(1, commit="a" * 40, day=5)
    second = trend_run(2, commit="bbbbbbb", day=1)  # a short commit matches by prefix
    off_history = trend_run(3, commit="f" * 40, day=3)

    ordered = commit_ordered([second, off_history, late_first_commit], history)

    assert [run.id for run in ordered] == [3, 1, 2]


def test_the_chart_places_one_point_per_run_and_breaks_lines_at_missing_rates() -> None:
    runs = [trend_run(1, rate=100), trend_run(2, rate=None), trend_run(3, rate=0)]

    drawn = chart(runs, {("standard", "bleu"): {1: 0.5, 3: 1.0}})

    assert [point.has_rate for point in drawn.points] == [True, False, True]
    assert len(drawn.pass_segments) == 2  # no line through the run without a pass rate
    # Not at 0 %: in a lane of its own under the pass-rate panel, below the 0 % of run 3.
    assert drawn.no_rate_y is not None
    assert drawn.points[1].y == drawn.no_rate_y > drawn.points[2].y
    assert "no pass rate" in drawn.points[1].title
    assert [panel.title for panel in drawn.panels] == [
        "Pass rate (%)",
        "standard metrics: average score (0–1)",
    ]
    (series,) = drawn.series
    assert [point.run.id for point in series.points] == [1, 3]
    assert drawn.points[0].y < drawn.points[2].y  # 100 % is drawn above 0 %


def test_a_point_says_its_run_in_its_title_with_the_time_as_given() -> None:
    title = point_title(trend_run(7, rate=87.5, commit="3f2a9c1d0b7e"))

    assert title.splitlines() == [
        "Run #7 · passed · pass rate 87.5%",
        "commit 3f2a9c1d on main",
        "prompt v1",
        "model gpt-4o (openai)",
        "2026-03-08 09:00",
    ]


def test_a_point_with_a_summary_says_its_case_counts_and_none_reads_no_pass_rate() -> None:
    cases = OutcomeCounts(total=4, passed=1, failed=2, not_graded=1)
    run = replace(trend_run(7, rate=cases.pass_rate), cases=cases)

    assert point_title(run).splitlines()[:2] == [
        "Run #7 · passed · pass rate 33.3%",
        "cases: 1 passed · 2 failed · 1 not graded",
    ]
    ungraded = replace(trend_run(8, rate=None), cases=OutcomeCounts(total=1, not_graded=1))
    assert point_title(ungraded).splitlines()[:2] == [
        "Run #8 · passed · no pass rate",
        "cases: 1 not graded",
    ]


def test_a_drop_reads_in_points_with_a_true_minus() -> None:
    drawn = chart([trend_run(1, rate=90), trend_run(2, rate=75)], {}, margin=10)

    assert [callout.text for callout in drawn.callouts] == ["\u221215 pts at #2"]
    assert drawn.no_rate_y is None  # every run has a pass rate: no lane


def regrade_of(original: TrendRun, run_id: int, *, rate: float | None) -> TrendRun:
    return replace(
        trend_run(run_id, rate=rate, commit=original.commit),
        regrade_of=original.id,
        transcripts_run=original.id,
        graded_with="strict",
        grading_commit="e" * 40,
    )


def test_regrades_are_split_from_the_series_and_placed_beside_the_run_they_grade() -> None:
    first, second = trend_run(1, commit="a" * 40), trend_run(2, commit="b" * 40)
    of_second, of_gone = regrade_of(second, 3, rate=10), regrade_of(trend_run(9), 4, rate=10)

    series, regrades = split_regrades([first, of_second, second, of_gone])
    placed, unplaced = regrades_placed(regrades, series)

    assert series == [first, second] and regrades == [of_second, of_gone]
    assert placed == [of_second] and unplaced == [of_gone]


def test_a_regrade_is_a_diamond_beside_its_run_off_the_line_and_out_of_the_drops() -> None:
    runs = [trend_run(1, rate=90), trend_run(2, rate=90)]
    regrade = regrade_of(runs[0], 3, rate=20)

    drawn = chart(runs, {}, margin=10, regrades=[regrade])

    (point,) = drawn.regrade_points
    assert point.x == drawn.points[0].x + REGRADE_SHIFT_MAX and point.y > drawn.points[0].y
    assert point.path.startswith(f"M{point.x},") and point.path.endswith(" Z")
    assert drawn.callouts == [] and len(drawn.pass_segments) == 1
    assert point.title.startswith("Re-grade #3 of #1 · passed · pass rate 20%")
    assert "graded with strict (commit eeeeeeee)" in point.title
    assert regrade.regrade_label == "re-grade of #1 with strict"


def test_each_metric_kind_gets_a_small_panel_of_its_own_in_kind_order() -> None:
    runs = [trend_run(1), trend_run(2)]
    averages = {
        ("code", "grader"): {1: 1.0, 2: 0.0},
        ("standard", "bleu"): {1: 0.5, 2: 0.25},
        ("standard", "rouge"): {1: 0.75},
        ("rag", "faithfulness"): {2: 0.9},
    }

    drawn = chart(runs, averages)

    titles = [panel.title for panel in drawn.panels]
    assert titles == [
        "Pass rate (%)",
        "standard metrics: average score (0–1)",
        "rag metrics: average score (0–1)",
        "code metrics: average score (0–1)",
    ]
    panels = dict(zip(titles, drawn.panels, strict=True))
    for series in drawn.series:
        panel = panels[f"{series.kind} metrics: average score (0–1)"]
        assert all(panel.top <= point.y <= panel.bottom for point in series.points)
    assert [(s.kind, s.name) for s in drawn.series] == [
        ("standard", "bleu"),
        ("standard", "rouge"),
        ("rag", "faithfulness"),
        ("code", "grader"),
    ]
    assert len({series.colour for series in drawn.series}) == 4  # one colour each, across panels
    assert all(a.bottom < b.top for a, b in zip(drawn.panels, drawn.panels[1:], strict=False))


def test_the_churn_panel_draws_fixes_up_and_regressions_down_on_one_scale() -> None:
    runs = [trend_run(1), trend_run(2), trend_run(3)]
    churn = {2: RunChurn(1, regressions=4, fixes=1), 3: RunChurn(2, regressions=0, fixes=2)}

    drawn = chart(runs, {}, churn=churn)

    panel = drawn.panels[1]
    assert panel.title == "Turns fixed (up) and regressed (down) against the run before"
    assert [label for _, label in panel.grid] == ["+4", "0", "−4"]
    zero = drawn.churn_zero
    assert zero == panel.top + CHURN_HEIGHT / 2
    second, third = drawn.churn  # none for the first run: nothing before it
    assert (second.run.id, third.run.id) == (2, 3)
    assert second.regression_y == zero and second.regression_height == CHURN_HEIGHT / 2
    assert second.fix_y + second.fix_height == zero and second.fix_height == CHURN_HEIGHT / 8
    assert third.regression_height == 0 and third.fix_height == CHURN_HEIGHT / 4
    assert second.title == "#2 against #1: 4 turns regressed, 1 fixed"
    assert drawn.points[1].x == round(second.x + second.width / 2, 1)


def test_without_churn_or_averages_only_the_pass_rate_is_drawn() -> None:
    drawn = chart([trend_run(1)], {})

    assert [panel.title for panel in drawn.panels] == ["Pass rate (%)"]
    assert drawn.churn == [] and drawn.churn_zero is None

"""Compare with repeated runs: a case's repetitions merged into one cell that says how many
passed, each case and turn classified significantly worse, better or no evidence, and the
headline's pass-rate change with its interval."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runs.compare.reads.comparison import comparison_for
from runs.models import AgentProject, CaseRow
from tests.web.factories import RunSpec, build_run, make_user, repeated_run

pytestmark = pytest.mark.django_db

STEADY = [0.9] * 9


@pytest.fixture
def dropped(project: AgentProject) -> tuple[int, int]:
    before = repeated_run(project, [0.9, *STEADY], repeats=30, seed=1, exact=True)
    after = repeated_run(project, [0.5, *STEADY], repeats=30, seed=2, commit="b" * 40, exact=True)
    return before.pk, after.pk


def test_a_repeated_case_is_one_row_whose_cell_counts_its_repetitions(
    dropped: tuple[int, int],
) -> None:
    before, after = dropped
    _, comparison = comparison_for([before, after], chosen=before)
    assert len(comparison.matrix.rows) == 10  # ten cases, not 300 repetitions
    first = CaseRow.objects.get(run_id=after, index=0, repetition=0)
    assert comparison.repetitions[first.pk] == (15, 30)
    row = next(row for row in comparison.matrix.rows if row.key == "case 0")
    assert row.cells[after].value == "failed"  # it failed in some repetitions


def test_the_compare_page_marks_the_significant_drop_and_the_noise(
    client: Client, dropped: tuple[int, int]
) -> None:
    before, after = dropped
    client.force_login(make_user("viewer"))
    page = client.get(reverse("compare"), {"runs": f"{before},{after}", "baseline": before}).text
    row = re.search(r'<tr class="matrix-row[^"]*" data-key="case 0">(.*?)</tr>', page, re.S)
    assert row is not None and "significantly worse" in row.group(1)
    assert '<span class="rep-frac" title="passed in 15 of its 30 graded repetitions">15/30' in (
        row.group(1)
    )
    assert page.count("significantly worse</span>") == 1 + 1  # the row, and the page's note
    assert "1 worse · 0 better" in page
    assert "pass-rate change (95 % interval)" in page


def test_runs_without_repeats_are_never_called_flaky_nor_tested(
    client: Client, project: AgentProject
) -> None:
    first = build_run(project, RunSpec(cases=4, turns=2, failing=()))
    second = build_run(project, RunSpec(cases=4, turns=2, failing=(1,), git_commit="b" * 40))
    CaseRow.objects.filter(run=second, index=1).update(name="refund case 1")
    client.force_login(make_user("viewer"))
    page = client.get(reverse("compare"), {"runs": f"{first.pk},{second.pk}"}).text
    assert "regressed" in page  # the verdict changed between the commits: a change
    assert "flaky" not in page.lower()
    assert "significantly" not in page and "rep-frac" not in page


def test_the_compare_api_classifies_each_case_and_sums_up_each_run(
    client: Client, dropped: tuple[int, int]
) -> None:
    from runs.services.tokens import token_create

    before, after = dropped
    _, secret = token_create(user=make_user("ci"), name="ci")
    answer = client.get(
        f"/api/v1/compare?runs={before}&runs={after}&baseline={before}",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert answer.status_code == 200, answer.content
    data = answer.json()
    row = next(row for row in data["rows"] if row["key"] == "case 0")
    assert row["significance"] == {str(after): "significantly_worse"}
    assert row["repetitions"] == {str(before): [27, 30], str(after): [15, 30]}
    [summary] = data["significance"]
    assert (summary["run_id"], summary["against"], summary["worse_cases"]) == (after, before, 1)
    assert summary["ci_low"] < summary["pass_rate_change"] < 0


def test_a_metrics_real_drop_over_repetitions_is_marked_and_a_wobble_is_not(
    client: Client, project: AgentProject
) -> None:
    # Case 0's rouge falls from 0.9 to 0.6 in every repetition; the others wobble around 0.8.
    before = repeated_run(project, [1.0] * 5, repeats=20, seed=11, scores=[0.9] + [0.8] * 4)
    after = repeated_run(
        project, [1.0] * 5, repeats=20, seed=12, commit="b" * 40, scores=[0.6] + [0.8] * 4
    )
    client.force_login(make_user("viewer"))
    query = {"runs": f"{before.pk},{after.pk}", "baseline": before.pk, "metric": "rouge"}
    page = client.get(reverse("compare"), query).text
    rows = dict(
        re.findall(r'<tr class="matrix-row[^"]*" data-key="([^"]+)">(.*?)</tr>', page, re.S)
    )
    assert "significant drop" in rows["case 0"]
    assert all("significant" not in rows[f"case {i}"] for i in range(1, 5))


def test_the_significance_of_more_repeated_runs_costs_no_more_queries(
    project: AgentProject, dropped: tuple[int, int]
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    before, after = dropped
    third = repeated_run(project, [0.9, *STEADY], repeats=30, seed=5, commit="c" * 40).pk

    def queries(runs: list[int]) -> int:
        with CaptureQueriesContext(connection) as captured:
            _, comparison = comparison_for(runs, chosen=before)
        assert len(comparison.significance) == len(runs) - 1
        return len(captured)

    assert queries([before, after, third]) == queries([before, after])


@pytest.fixture
def wobbled(project: AgentProject) -> tuple[int, int]:
    """Case 0 passes in 6 of 10 repetitions, then in 4 of 10: its merged verdict goes from
    passed to failed, which is well within noise."""
    before = repeated_run(project, [0.6, 1.0, 1.0], repeats=10, seed=1, exact=True)
    after = repeated_run(
        project, [0.4, 1.0, 1.0], repeats=10, seed=2, commit="b" * 40, exact=True, minutes=5
    )
    return before.pk, after.pk


def test_a_change_within_noise_is_never_drawn_nor_counted_as_a_regression(
    client: Client, wobbled: tuple[int, int]
) -> None:
    before, after = wobbled
    client.force_login(make_user("viewer"))

    def compared(**params: str) -> Any:
        query = {"runs": f"{before},{after}", "baseline": before, **params}
        return client.get(reverse("compare"), query)

    response = compared()
    page = response.text
    row = re.search(r'<tr class="matrix-row([^"]*)" data-key="case 0">(.*?)</tr>', page, re.S)
    assert row is not None
    classes, cells = row.groups()
    assert "no evidence" in cells and "changed within noise" in cells
    assert "regressed" not in cells and "has-regression" not in classes
    # Every count agrees: no regression by kind nor in the headline, and the row is changed.
    context = response.context
    (view,) = [view for view in context["rows"] if view.row.key == "case 0"]
    assert [mark.change for mark in view.cells[1].turns] == ["noise"]  # its turn's mark
    assert all(counts == [(0, 0)] for _, counts in context["kind_changes"])
    assert {headline.regressions for headline in context["comparison"].headlines} == {0}
    assert context["changed_cases"] == [1]
    keys = [view.row.key for view in compared(show="regressions").context["rows"]]
    assert keys == []
    assert [view.row.key for view in compared(show="changed").context["rows"]] == ["case 0"]


def test_the_headline_of_repeated_runs_counts_cases_as_the_matrix_does(
    client: Client, wobbled: tuple[int, int]
) -> None:
    before, after = wobbled
    client.force_login(make_user("viewer"))
    context = client.get(reverse("compare"), {"runs": f"{before},{after}"}).context
    lines = {line.label: [cell.text for cell in line.cells] for line in context["lines"]}
    assert len(context["rows"]) == 3
    assert lines["cases"] == ["3", "3"]  # as many as the matrix's rows, not 30
    assert lines["cases passed"] == ["3", "2"]  # the cells' verdicts
    assert lines["repetitions"] == ["30", "30"]
    assert lines["repetitions passed"] == ["26", "24"]
    assert "pass rate, over repetitions" in lines


def test_the_significance_note_explains_the_test_on_the_page_not_by_a_file_path(
    client: Client, wobbled: tuple[int, int]
) -> None:
    before, after = wobbled
    client.force_login(make_user("viewer"))
    page = client.get(reverse("compare"), {"runs": f"{before},{after}"}).text
    assert "docs/significance.md" not in page  # the app serves no docs: a dead reference
    how = re.search(r'<details class="small significance-how">(.*?)</details>', page, re.S)
    assert how is not None and "Benjamini–Hochberg" in how.group(1)


def test_side_by_side_a_repeated_case_is_its_first_repetition_never_marked_regressed(
    client: Client, wobbled: tuple[int, int]
) -> None:
    before, after = wobbled
    client.force_login(make_user("viewer"))
    response = client.get(reverse("compare_case"), {"runs": f"{before},{after}", "key": "case 0"})
    assert response.status_code == 200
    context = response.context
    assert {case.repetition for case in context["cases"].values()} == {0}
    assert [run.pk for run in context["repeated"]] == [before, after]
    (section,) = context["sections"]
    assert [column.change for column in section.columns] == [None, None]
    assert "judged over all its repetitions" in response.text
    assert "regression</span>" not in response.text

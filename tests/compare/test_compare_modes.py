"""The compare page and API with three runs: in commit order (each run against the one before
it), a chosen metric's score deltas (sorted by the largest drop, filtered by a minimum drop),
the search of turns' inputs and outputs, "changed back and forth" in place of "flaky", and the
side by side of every compared run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import AgentProject, CaseRow, MetricRow, Run
from runs.services.tokens import token_create
from tests.compare.compare_data import LOST, LOW_ROUGE, ThreeRuns, three_runs
from tests.compare.test_compare import three_commits
from tests.web.factories import RunSpec, build_run, make_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(project: AgentProject) -> ThreeRuns:
    return three_runs(project)


def page(client: Client, runs: str, status: int = 200, **params: str) -> Any:
    response = client.get(reverse("compare"), {"runs": runs, **params})
    assert response.status_code == status, response.content[:3000]
    return response


def keys(response: Any) -> list[str]:
    return [view.row.key for view in response.context["rows"]]


def cell(response: Any, key: str, run: Run) -> Any:
    view = next(view for view in response.context["rows"] if view.row.key == key)
    return next(cell for cell in view.cells if cell.run_id == run.pk)


# --- commit order ------------------------------------------------------------------------------


def test_in_commit_order_the_runs_are_oldest_first_each_against_the_one_before(
    viewer_client: Client, data: ThreeRuns
) -> None:
    shuffled = f"{data.newest.pk},{data.oldest.pk},{data.middle.pk}"

    by_baseline = page(viewer_client, shuffled).context
    in_time = page(viewer_client, shuffled, order="commits").context

    # Against the rule's baseline (the middle run) too, the columns are oldest first.
    assert by_baseline["baseline"].run.pk == data.middle.pk
    assert [run.pk for run in by_baseline["runs"]] == [
        data.oldest.pk,
        data.middle.pk,
        data.newest.pk,
    ]
    assert [run.pk for run in in_time["runs"]] == [data.oldest.pk, data.middle.pk, data.newest.pk]
    assert [c.against.pk if c.against else None for c in in_time["columns"]] == [
        None,
        data.oldest.pk,
        data.middle.pk,
    ]
    # Case 1 failed at the oldest: against the middle (the baseline) the oldest reads forward
    # in time, so the middle fixed it, as in commit order (where the newest broke it again).
    assert cell(page(viewer_client, shuffled), "refund case 1", data.oldest).turns[1].change == (
        "fix"
    )
    marks = [cell(page(viewer_client, shuffled, order="commits"), "refund case 1", run) for run in
             (data.middle, data.newest)]  # fmt: skip
    assert [mark.turns[1].change for mark in marks] == ["fix", "regression"]
    assert dict(in_time["kind_changes"])["code"] == [(1, 1), (2, 1)]


def test_the_headline_deltas_in_commit_order_are_against_the_run_before(
    viewer_client: Client, data: ThreeRuns
) -> None:
    context = page(viewer_client, data.ids, order="commits").context
    lines = {
        line.label: [(cell.text, cell.delta) for cell in line.cells] for line in context["lines"]
    }

    assert lines["cases failed"] == [("1", ""), ("1", "±0"), ("2", "+1")]
    html = page(viewer_client, data.ids, order="commits").text
    assert "Chronological: the runs in date order, oldest first" in html
    assert f'runs={data.middle.pk},{data.newest.pk}">config diff' in html


def test_commit_order_follows_the_git_history_not_the_dates(
    viewer_client: Client, tmp_path: Path
) -> None:
    commits = three_commits(tmp_path)
    project = make_project("git-agent", str(tmp_path))
    # Made newest commit first: dates and commits disagree.
    runs = [
        build_run(project, RunSpec(cases=2, turns=1, failing=(), git_commit=commit))
        for commit in reversed(commits)
    ]

    context = page(viewer_client, ",".join(str(r.pk) for r in runs), order="commits").context

    assert [run.pk for run in context["runs"]] == [run.pk for run in reversed(runs)]
    assert context["comparison"].timeline_note == "in commit order of HEAD"


def test_the_order_toggle_keeps_every_other_setting_and_the_form_keeps_the_order(
    viewer_client: Client, data: ThreeRuns
) -> None:
    html = page(viewer_client, data.ids, kinds="code", metric="rouge", q="refund").text

    toggle = re.search(r'<a href="\?([^"]+)" class="order-commits"', html)
    assert toggle is not None
    link = toggle.group(1).replace("&amp;", "&")
    assert "order=commits" in link and "kinds=code" in link
    assert "metric=rouge" in link and "q=refund" in link
    again = page(viewer_client, data.ids, order="commits").text
    assert '<option value="commits" selected>in commit order' in again
    assert 'aria-current="page">in commit order' in again


# --- a metric's score deltas ---------------------------------------------------------------------


def test_each_cell_shows_the_metrics_delta_against_the_cell_it_is_compared_with(
    viewer_client: Client, data: ThreeRuns
) -> None:
    by_baseline = page(viewer_client, data.ids, metric="rouge", baseline=str(data.oldest.pk))
    in_time = page(viewer_client, data.ids, metric="rouge", order="commits")

    # Case 1 failed (rouge 0.31 on its turn 2, 0.82 elsewhere, the last turn skipped) in the
    # oldest and the newest run, passed in the middle one.
    assert cell(by_baseline, "refund case 1", data.newest).delta == pytest.approx(0)
    assert cell(in_time, "refund case 1", data.newest).delta == pytest.approx(0.565 - 0.82)
    assert cell(in_time, "refund case 4", data.newest).delta == pytest.approx(LOW_ROUGE - 0.82)
    html = in_time.text
    assert 'class="score-delta worse" data-delta="-0.72"' in html
    assert "−0.72</span>" in html


def test_a_cell_without_a_stored_score_of_the_metric_shows_nothing_never_zero(
    viewer_client: Client, data: ThreeRuns
) -> None:
    MetricRow.objects.filter(run=data.newest, turn__case__index=0, metric_name="rouge").delete()
    MetricRow.objects.filter(run=data.middle, turn__case__index=3, metric_name="rouge").update(
        score=None
    )

    response = page(viewer_client, data.ids, metric="rouge", order="commits")

    gone = cell(response, "refund case 0", data.newest)
    assert (gone.score, gone.delta) == (None, None)
    unscored = cell(response, "refund case 3", data.middle)
    assert (unscored.score, unscored.delta) == (None, None)
    after = cell(response, "refund case 3", data.newest)  # nothing to compare it with
    assert after.score is not None and after.delta is None
    row = response.text.split('data-key="refund case 0"', 1)[1].split("</tr>", 1)[0]
    assert row.count("score-delta") == 2  # the oldest's score and the middle's delta only


def test_sorting_by_delta_puts_the_largest_drop_first_and_min_drop_filters(
    viewer_client: Client, data: ThreeRuns
) -> None:
    params = {"metric": "rouge", "order": "commits"}

    ordered = keys(page(viewer_client, data.ids, sort="delta", **params))
    dropped = keys(page(viewer_client, data.ids, min_drop="0.2", sort="delta", **params))
    deep = keys(page(viewer_client, data.ids, min_drop="0.5", **params))

    assert ordered[0] == "refund case 4"  # -0.72 at the newest
    assert ordered[1:4] == ["refund case 1", "refund case 2", "refund case 3"]  # -0.255 each
    assert dropped == ["refund case 4", "refund case 1", "refund case 2", "refund case 3"]
    assert deep == ["refund case 4"]


def test_the_metric_select_lists_the_runs_metrics(viewer_client: Client, data: ThreeRuns) -> None:
    html = page(viewer_client, data.ids, kinds="code").text

    options = re.findall(
        r'<option value="([^"]*)"[^>]*>([^<]*)</option>',
        html.split('name="metric"')[1].split("</select>")[0],
    )
    assert options == [
        ("", "none"),
        ("politeness", "politeness (geval)"),
        ("refund_grader", "refund_grader (code)"),
        ("rouge", "rouge (standard)"),
    ]


# --- the search --------------------------------------------------------------------------------


def test_the_search_keeps_the_cases_whose_turn_input_or_response_holds_the_text(
    viewer_client: Client, data: ThreeRuns
) -> None:
    in_response = page(viewer_client, data.ids, q="lost IN transit")
    in_input = page(viewer_client, data.ids, q="order 3-2?")
    nowhere = page(viewer_client, data.ids, q="no such words")

    assert keys(in_response) == ["refund case 5"]
    hit = cell(in_response, "refund case 5", data.middle)
    assert [mark.index for mark in hit.turns if mark.hit] == [0]
    assert not any(mark.hit for mark in cell(in_response, "refund case 5", data.oldest).turns)
    assert keys(in_input) == ["refund case 3"]
    assert keys(nowhere) == [] and "No case where “no such words” occurs" in nowhere.text


def test_a_matching_row_links_to_the_side_by_side_at_the_turn_that_matched(
    viewer_client: Client, data: ThreeRuns
) -> None:
    html = page(viewer_client, data.ids, q="lost in transit", order="commits").text

    link = re.search(r'<a class="hit-link" href="([^"]+)">match in turn 1</a>', html)
    assert link is not None
    href = link.group(1).replace("&amp;", "&")
    assert href.startswith(f"/compare/case/?runs={data.ids}&order=commits")
    assert "q=lost+in+transit" in href and href.endswith("key=refund+case+5#turn-1")
    side = viewer_client.get(href.split("#")[0])
    assert side.status_code == 200
    assert "<mark>LOST in transit</mark>" in side.text


def test_a_search_with_a_like_wildcard_matches_it_as_text(
    viewer_client: Client, data: ThreeRuns
) -> None:
    assert keys(page(viewer_client, data.ids, q="%")) == []
    assert keys(page(viewer_client, data.ids, q="_")) == []


# --- changed back and forth, never "flaky" -------------------------------------------------------


def test_nothing_is_called_flaky_and_show_flaky_now_reads_unstable(
    viewer_client: Client, data: ThreeRuns
) -> None:
    every = page(viewer_client, data.ids, order="commits")
    old_link = page(viewer_client, data.ids, show="flaky")
    new_name = page(viewer_client, data.ids, show="unstable")

    assert "flaky" not in every.text.lower()
    # Case 1 failed, passed, failed; case 2 passed, failed, passed: each went back and forth.
    assert keys(old_link) == keys(new_name) == ["refund case 1", "refund case 2"]
    assert "<strong>show=flaky</strong> now reads <strong>unstable</strong>" in old_link.text
    assert old_link.context["state"]["show"] == "unstable"
    assert '<option value="unstable" selected>unstable (changed back and forth)' in old_link.text
    assert "changed back and forth</span>" in new_name.text


def test_runs_of_different_commits_whose_verdicts_differ_once_are_not_unstable(
    viewer_client: Client, project: AgentProject
) -> None:
    older = build_run(project, RunSpec(cases=3, turns=1, failing=(), git_commit="a" * 40))
    newer = build_run(project, RunSpec(cases=3, turns=1, failing=(1,), git_commit="b" * 40))
    CaseRow.objects.filter(run=newer, index=1).update(name="refund case 1")

    response = page(viewer_client, f"{older.pk},{newer.pk}", show="unstable")

    assert keys(response) == []
    assert keys(page(viewer_client, f"{older.pk},{newer.pk}", show="regressions")) != []


# --- bad values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"order": "sideways"}, "order", "must be one of baseline, commits"),
        ({"metric": "vibes"}, "metric", "no metric “vibes” in these runs"),
        ({"sort": "delta"}, "sort", "sorting by delta needs a metric"),
        ({"min_drop": "0.1"}, "min_drop", "a minimum drop needs a metric"),
        ({"metric": "rouge", "min_drop": "2"}, "min_drop", "must be between 0 and 1"),
        ({"metric": "rouge", "min_drop": "lots"}, "min_drop", "is not a number"),
        ({"q": "x" * 201}, "q", "longer than 200"),
        ({"q": "a\x00b"}, "q", "NUL"),
    ],
)
def test_a_bad_new_setting_is_a_400_with_the_error_at_its_field(
    viewer_client: Client, data: ThreeRuns, params: dict[str, str], field: str, message: str
) -> None:
    response = page(viewer_client, data.ids, status=400, **params)

    html = response.text
    assert 'id="compare-form"' in html and "Cases × runs" in html
    error = re.search(rf'<span class="field-error" id="{field}-error">([^<]*)</span>', html)
    assert error and message in error.group(1), error and error.group(1)
    assert f'aria-describedby="{field}-error"' in html


# --- the side by side of every compared run ------------------------------------------------------


def side(client: Client, status: int = 200, **params: str) -> Any:
    response = client.get(reverse("compare_case"), params)
    assert response.status_code == status, response.content[:3000]
    return response


def test_the_side_by_side_shows_every_compared_run_as_a_column(
    viewer_client: Client, data: ThreeRuns
) -> None:
    response = side(viewer_client, runs=data.ids, key="refund case 1")

    html = response.text
    sections = response.context["sections"]
    assert [section.index for section in sections] == [0, 1, 2]
    regressed = sections[1]
    assert [column.run.pk for column in regressed.columns] == [
        data.oldest.pk,
        data.middle.pk,
        data.newest.pk,
    ]
    # Against the first (the baseline): the middle fixed turn 2, the newest is as the oldest.
    assert [column.change for column in regressed.columns] == [None, "fix", None]
    assert html.count('<div class="side run-column') == 9  # 3 turns × 3 runs
    rouge = next(metric for metric in regressed.metrics if metric.name == "rouge")
    assert [cell.delta for cell in rouge.cells] == [None, pytest.approx(0.51), pytest.approx(0)]
    assert "arg order_id" in html  # the tool call against the first, call by call
    assert "<ins>" in html and "<del>" in html  # the response word by word


def test_the_side_by_side_in_commit_order_compares_each_column_with_the_one_before(
    viewer_client: Client, data: ThreeRuns
) -> None:
    response = side(viewer_client, runs=data.ids, key="refund case 1", order="commits", turn="1")

    (section,) = response.context["sections"]
    assert [column.change for column in section.columns] == [None, "fix", "regression"]
    assert section.change == "regression"
    assert f"regressed in #{data.newest.pk}" in response.text
    assert f"fixed in #{data.middle.pk}" in response.text
    assert 'aria-current="page">turn 2</span>' in response.text


def test_the_side_by_side_marks_the_searched_text_in_each_run(
    viewer_client: Client, data: ThreeRuns
) -> None:
    response = side(viewer_client, runs=data.ids, key="refund case 5", q="lost in transit")

    (first, *_) = response.context["sections"]
    assert [column.hit for column in first.columns] == [False, True, False]
    assert "<mark>LOST in transit</mark>" in response.text
    assert LOST.split(",")[0] in response.text


@pytest.mark.parametrize(
    "params",
    [
        {"runs": "1", "key": "refund case 1"},
        {"key": "refund case 1", "turn": "7"},
        {"key": "refund case 1", "turn": "x"},
        {"key": "refund case 1", "order": "sideways"},
        {"key": ""},
    ],
)
def test_a_bad_side_by_side_request_is_a_400(
    viewer_client: Client, data: ThreeRuns, params: dict[str, str]
) -> None:
    side(viewer_client, status=400, **{"runs": data.ids, **params})


def test_the_side_by_side_of_twelve_runs_costs_the_queries_of_two(
    viewer_client: Client, project: AgentProject
) -> None:
    runs = [build_run(project, RunSpec(cases=2, turns=2, failing=())) for _ in range(12)]

    def queries(count: int) -> int:
        ids = ",".join(str(run.pk) for run in runs[:count])
        with CaptureQueriesContext(connection) as captured:
            response = side(viewer_client, runs=ids, key="refund case 0")
        assert response.text.count('<div class="side run-column') == 2 * count
        return len(captured)

    assert queries(12) == queries(2)


# --- the API -----------------------------------------------------------------------------------


def api(viewer: User, **params: Any) -> Any:
    _, secret = token_create(user=viewer, name="ci")
    client = Client(headers={"Authorization": f"Bearer {secret}"})
    return client.get("/api/v1/compare", params)


def test_the_api_takes_the_commit_order_a_metric_and_a_search(
    viewer: User, data: ThreeRuns
) -> None:
    ids = [data.newest.pk, data.oldest.pk, data.middle.pk]

    in_time = api(viewer, runs=ids, order="commits", metric="rouge").json()
    searched = api(viewer, runs=ids, q="LOST in transit").json()

    assert in_time["runs"] == [data.oldest.pk, data.middle.pk, data.newest.pk]
    assert in_time["order"] == "commits"
    assert in_time["against"] == {
        str(data.middle.pk): data.oldest.pk,
        str(data.newest.pk): data.middle.pk,
    }
    rows = {row["key"]: row for row in in_time["rows"]}
    assert rows["refund case 4"]["deltas"][str(data.newest.pk)] == pytest.approx(-0.72)
    assert rows["refund case 1"]["unstable"] is rows["refund case 1"]["flaky"] is True
    assert rows["refund case 0"]["unstable"] is False
    assert [row["key"] for row in searched["rows"]] == ["refund case 5"]
    assert searched["rows"][0]["hits"] == {str(data.middle.pk): [0]}
    assert searched["row_count"] == 1
    assert api(viewer, runs=ids, metric="vibes").status_code == 422
    assert api(viewer, runs=ids, order="sideways").status_code == 422


def test_the_api_order_type_is_the_compare_modules() -> None:
    from typing import get_args

    from runs.compare.api import Order
    from runs.core.comparison.matrix import ORDERS

    assert get_args(Order) == ORDERS

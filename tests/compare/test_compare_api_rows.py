"""The compare page and ``GET /api/v1/compare`` keep the same rows, in the same order, for the
same options: both read them with one query object and one selector
(``runs.compare.reads.compared_rows``), so the API takes the page's show, sort, min_drop, metric and
q with the page's names and defaults, and refuses what the page refuses."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject
from runs.services.tokens import token_create
from tests.compare.compare_data import ThreeRuns, three_runs
from tests.web.factories import make_user, repeated_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(project: AgentProject) -> ThreeRuns:
    return three_runs(project)


def api(viewer: User, **params: Any) -> Any:
    _, secret = token_create(user=viewer, name="ci")
    client = Client(headers={"Authorization": f"Bearer {secret}"})
    return client.get("/api/v1/compare", params)


def page_rows(client: Client, runs: list[int], **params: str) -> list[dict[str, Any]]:
    query = {"runs": ",".join(map(str, runs)), **params}
    response = client.get(reverse("compare"), query)
    assert response.status_code == 200, response.content[:2000]
    return [
        {"key": view.row.key, "scores": view.row.scores, "deltas": view.row.deltas}
        for view in response.context["rows"]
    ]


def api_rows(viewer: User, runs: list[int], **params: str) -> list[dict[str, Any]]:
    answer = api(
        viewer, runs=runs, **{k: v.split(",") if k == "kinds" else v for k, v in params.items()}
    )
    assert answer.status_code == 200, answer.content[:2000]
    return [
        {
            "key": row["key"],
            "scores": {int(k): v for k, v in row["scores"].items()},
            "deltas": {int(k): v for k, v in row["deltas"].items()},
        }
        for row in answer.json()["rows"]
    ]


OPTIONS: list[dict[str, str]] = [
    {},
    {"show": "regressions"},
    {"show": "fixes"},
    {"show": "changed"},
    {"show": "unstable"},
    {"show": "flaky"},
    {"sort": "name"},
    {"sort": "regressions"},
    {"metric": "rouge"},
    {"metric": "rouge", "sort": "delta"},
    {"metric": "rouge", "min_drop": "0.5"},
    {"metric": "rouge", "min_drop": "0.01", "sort": "delta"},
    {"metric": "rouge", "sort": "delta", "show": "changed"},
    {"q": "LOST in transit"},
    {"q": "refund", "sort": "regressions"},
    {"order": "commits", "show": "regressions"},
    {"order": "commits", "show": "fixes", "sort": "regressions"},
    {"kinds": "code", "show": "regressions"},
    {"kinds": "code,tools", "sort": "regressions"},
]


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: "&".join(f"{k}={v}" for k, v in o.items()) or "defaults"
)
def test_the_page_and_the_api_keep_the_same_rows_in_the_same_order(
    viewer: User, data: ThreeRuns, options: dict[str, str]
) -> None:
    runs = [data.newest.pk, data.oldest.pk, data.middle.pk]
    client = Client()
    client.force_login(viewer)

    on_page = page_rows(client, runs, **options)

    assert api_rows(viewer, runs, **options) == on_page


def test_the_page_and_the_api_agree_with_a_chosen_baseline(viewer: User, data: ThreeRuns) -> None:
    runs = [data.oldest.pk, data.middle.pk, data.newest.pk]
    client = Client()
    client.force_login(viewer)
    options = {"baseline": str(data.oldest.pk), "metric": "rouge", "sort": "delta"}

    assert api_rows(viewer, runs, **options) == page_rows(client, runs, **options)


def test_the_api_sorts_by_the_largest_drop_and_keeps_the_rows_that_dropped_enough(
    viewer: User, data: ThreeRuns
) -> None:
    runs = [data.oldest.pk, data.middle.pk, data.newest.pk]

    by_drop = api(viewer, runs=runs, metric="rouge", sort="delta").json()
    dropped = api(viewer, runs=runs, metric="rouge", min_drop="0.5").json()

    assert by_drop["rows"][0]["key"] == "refund case 4"
    assert [row["key"] for row in dropped["rows"]] == ["refund case 4"]
    assert dropped["row_count"] == 1


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"sort": "delta"}, "sort"),
        ({"min_drop": "0.2"}, "min_drop"),
        ({"metric": "vibes"}, "metric"),
    ],
)
def test_the_api_refuses_what_the_page_refuses(
    viewer: User, data: ThreeRuns, options: dict[str, str], field: str
) -> None:
    runs = [data.oldest.pk, data.newest.pk]
    client = Client()
    client.force_login(viewer)

    on_page = client.get(reverse("compare"), {"runs": f"{runs[0]},{runs[1]}", **options})
    answer = api(viewer, runs=runs, **options)

    assert on_page.status_code == 400 and field in on_page.context["errors"]
    assert answer.status_code == 422
    assert field in answer.json()["detail"] or "no metric" in answer.json()["detail"]


@pytest.mark.parametrize(
    "options", [{"sort": "sideways"}, {"min_drop": "2"}, {"min_drop": "-0.1"}, {"show": "some"}]
)
def test_a_bad_value_of_a_new_api_option_is_a_422(
    viewer: User, data: ThreeRuns, options: dict[str, str]
) -> None:
    assert api(viewer, runs=[data.oldest.pk, data.newest.pk], **options).status_code == 422


def test_the_api_says_a_metrics_significant_drop_over_repetitions_as_the_page_marks_it(
    project: AgentProject,
) -> None:
    # Case 0's rouge falls from 0.9 to 0.6 in every repetition; the others wobble around 0.8.
    before = repeated_run(project, [1.0] * 5, repeats=20, seed=11, scores=[0.9] + [0.8] * 4)
    after = repeated_run(
        project, [1.0] * 5, repeats=20, seed=12, commit="b" * 40, scores=[0.6] + [0.8] * 4
    )
    viewer = make_user("viewer")

    answer = api(viewer, runs=[before.pk, after.pk], baseline=before.pk, metric="rouge")

    assert answer.status_code == 200, answer.content[:2000]
    rows = {row["key"]: row for row in answer.json()["rows"]}
    assert rows["case 0"]["score_significance"] == {str(after.pk): "significantly_worse"}
    assert all(
        rows[f"case {i}"]["score_significance"].get(str(after.pk)) == "no_evidence"
        for i in range(1, 5)
    )
    without_metric = api(viewer, runs=[before.pk, after.pk], baseline=before.pk).json()
    assert all(not row["score_significance"] for row in without_metric["rows"])


def test_the_api_sort_type_is_the_compare_modules() -> None:
    from typing import get_args

    from runs.compare.api import Sort
    from runs.core.comparison.query import SORTS

    assert get_args(Sort) == SORTS

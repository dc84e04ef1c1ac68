"""The runs list's filters (date range, prompt version, model, tag, minimum pass rate, free text),
its selects of the values present, its query budget, and the compare picks on its rows.

The JSON filters run in SQL, so they page correctly; run this file with
``DATABASE_URL=postgres://...`` to check them on PostgreSQL too.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import AgentProject, Run
from runs.web.views import RUNS_PER_PAGE
from tests.web.factories import RunSpec, build_run, make_project

pytestmark = pytest.mark.django_db

LIST_BUDGET = 12


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2025, 3, day, hour, tzinfo=UTC)


def make_run(
    project: AgentProject | None,
    *,
    version: str | None = None,
    tags: Any = (),
    model: str | None = None,
    created_at: datetime | None = None,
    spec: RunSpec | None = None,
    **fields: Any,
) -> Run:
    prompt = None if version is None else {"version": version, "author": "ana", "tags": tags}
    if prompt is not None and not isinstance(tags, tuple | list):
        prompt["tags"] = tags  # a hostile file's tags need not be a list
    elif prompt is not None:
        prompt["tags"] = list(tags)
    config = {"model": {"provider": "openai", "name": model}} if model else {}
    run = build_run(
        project,
        spec or RunSpec(cases=2, turns=1, failing=(1,)),  # 50 %
        prompt_version=prompt,
        config_snapshot=config,
        created_at=created_at or at(10),
    )
    if fields:  # columns build_run sets itself
        Run.objects.filter(pk=run.pk).update(**fields)
    return run


@pytest.fixture
def runs(project: AgentProject) -> dict[str, Run]:
    """Five runs that differ in every filtered column."""
    other = make_project("billing-agent", "/srv/billing")
    return {
        "early": make_run(
            project, version="v1", tags=["baseline"], model="gpt-4o", created_at=at(1, 8)
        ),
        "prod": make_run(
            project,
            version="v2",
            tags=["prod", "eu"],
            model="gpt-4o-mini",
            created_at=at(5, 23),
            spec=RunSpec(cases=4, turns=1, failing=()),  # 100 %
        ),
        "production": make_run(
            project,
            version="v2",
            tags=["production"],
            model="claude-sonnet-4",
            created_at=at(6, 0),
            spec=RunSpec(cases=4, turns=1, failing=(0, 1, 2)),  # 25 %
        ),
        "billing": make_run(
            other,
            version="v10",
            tags=["Prod", 'naïve "quoted"'],
            model="gpt-4o",
            created_at=at(9),
            git_branch="feature/refunds",
            spec=RunSpec(cases=4, turns=1, failing=(0,), git_commit="beef" + "0" * 36),  # 75 %
        ),
        "bare": make_run(None, created_at=at(12)),  # no prompt version, no model
    }


def listed(client: Client, params: dict[str, Any]) -> set[int]:
    response = client.get(reverse("run_list"), params)
    assert response.status_code == 200, response.text
    return {run.pk for run in response.context["page"]}


def names(runs: dict[str, Run], *keys: str) -> set[int]:
    return {runs[key].pk for key in keys}


@pytest.mark.parametrize(
    "params, expected",
    [
        ({}, ["early", "prod", "production", "billing", "bare"]),
        ({"version": "v2"}, ["prod", "production"]),
        ({"version": "v1"}, ["early"]),  # not v10: an exact match
        ({"model": "gpt-4o"}, ["early", "billing"]),  # not gpt-4o-mini
        ({"tag": "prod"}, ["prod"]),  # not "production", not "Prod"
        ({"tag": "Prod"}, ["billing"]),
        ({"tag": 'naïve "quoted"'}, ["billing"]),
        ({"tag": "eu"}, ["prod"]),
        ({"tag": "prod, eu"}, []),  # a tag, not a piece of the list's JSON text
        ({"min_pass": "75"}, ["prod", "billing"]),
        ({"min_pass": "0"}, ["early", "prod", "production", "billing", "bare"]),
        ({"min_pass": "100"}, ["prod"]),
        ({"since": "2025-03-06"}, ["production", "billing", "bare"]),
        ({"until": "2025-03-05"}, ["early", "prod"]),  # the whole day: 23:00 is in
        ({"since": "2025-03-05", "until": "2025-03-05"}, ["prod"]),
        ({"until": "2025-03-05T22:00:00Z"}, ["early"]),  # an instant: 23:00 is out
        ({"until": "2025-03-05T23:00:00+00:00"}, ["early", "prod"]),  # inclusive
        ({"since": "2025-03-05T23:00:01Z"}, ["production", "billing", "bare"]),
    ],
)
def test_each_filter_alone_keeps_only_the_runs_that_match(
    viewer_client: Client, runs: dict[str, Run], params: dict[str, str], expected: list[str]
) -> None:
    assert listed(viewer_client, params) == names(runs, *expected)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("V2", ["prod", "production"]),  # prompt version, any case
        ("4o-MINI", ["prod"]),  # model name
        ("claude", ["production"]),
        ("BEEF", ["billing"]),  # commit prefix
        ("refunds", ["billing"]),  # branch
        ("billing-agent", ["billing"]),  # agent name
        ("produc", ["production"]),  # part of a tag
        ("NAïVE", ["billing"]),  # a decoded tag (SQLite folds the case of ASCII letters only)
        ('"quoted"', ["billing"]),  # a tag's own quotes, not the JSON's
        ("100%", []),  # LIKE wildcards are literal
        ("nothing-like-this", []),
    ],
)
def test_the_search_box_matches_version_model_commit_branch_agent_and_tags(
    viewer_client: Client, runs: dict[str, Run], query: str, expected: list[str]
) -> None:
    assert listed(viewer_client, {"q": query}) == names(runs, *expected)


def test_the_filters_combine_with_each_other_and_with_project_status_and_agent(
    viewer_client: Client, runs: dict[str, Run], project: AgentProject
) -> None:
    assert listed(viewer_client, {"version": "v2", "min_pass": "50"}) == names(runs, "prod")
    assert listed(
        viewer_client, {"project": project.pk, "model": "gpt-4o", "since": "2025-03-01"}
    ) == names(runs, "early")
    assert listed(viewer_client, {"tag": "Prod", "q": "refunds", "status": "failed"}) == names(
        runs, "billing"
    )
    assert listed(viewer_client, {"agent": "weather-agent", "q": "v2", "until": "2025-03-05"}) == (
        names(runs, "prod")
    )
    assert (
        listed(viewer_client, {"version": "v2", "tag": "eu", "model": "claude-sonnet-4"}) == set()
    )


def test_a_tag_filter_pages_in_sql(viewer_client: Client, project: AgentProject) -> None:
    for index in range(RUNS_PER_PAGE + 5):
        make_run(project, version="v3", tags=["nightly"] if index % 2 else ["nightly-eu"])
    make_run(project, version="v3", tags="nightly")  # not a list: has no tags
    response = viewer_client.get(reverse("run_list"), {"tag": "nightly"})
    page = response.context["page"]
    assert page.paginator.count == (RUNS_PER_PAGE + 5) // 2
    assert all(run.prompt_version["tags"] == ["nightly"] for run in page)


@pytest.mark.parametrize(
    "params, field, message",
    [
        ({"min_pass": "101"}, "min_pass", "must be between 0 and 100"),
        ({"min_pass": "-1"}, "min_pass", "must be between 0 and 100"),
        ({"min_pass": "half"}, "min_pass", "is not a number"),
        ({"min_pass": "nan"}, "min_pass", "must be between 0 and 100"),
        ({"since": "yesterday"}, "since", "is not a date"),
        ({"until": "2025-13-01"}, "until", "is not a date"),
        ({"until": "9999-12-31"}, "until", "is out of range"),  # its day ends in year 10000
        ({"since": "2025-03-06", "until": "2025-03-05"}, "until", "must be later than since"),
        ({"version": "v\x002"}, "version", "must not contain a NUL character"),
        ({"model": "m" * 201}, "model", "is longer than 200 characters"),
        ({"tag": "a\x00"}, "tag", "must not contain a NUL character"),
        ({"q": "x" * 201}, "q", "is longer than 200 characters"),
        ({"status": "done"}, "status", "must be one of"),
        ({"project": "x"}, "project", "is not a whole number"),
    ],
)
def test_a_bad_filter_value_is_a_400_showing_the_form_with_the_error_at_its_field(
    viewer_client: Client, params: dict[str, str], field: str, message: str
) -> None:
    response = viewer_client.get(reverse("run_list"), params)
    assert response.status_code == 400
    html = response.text
    assert '<form method="get" class="filters" role="search">' in html
    error = re.search(rf'<span class="field-error" id="{field}-error">([^<]*)</span>', html)
    assert error, html[:3000]
    assert message in error.group(1)
    assert f'aria-describedby="{field}-error"' in html
    assert "No runs match" not in html and 'id="compare-form"' not in html


def test_a_refused_min_pass_keeps_its_value_in_the_field_and_the_other_filters(
    viewer_client: Client, project: AgentProject
) -> None:
    response = viewer_client.get(
        reverse("run_list"), {"min_pass": "150", "status": "failed", "commit": "3f2a"}
    )
    assert response.status_code == 400
    html = response.text
    assert 'name="min_pass" type="text" value="150"' in html
    assert '<option value="failed" selected>' in html
    assert 'name="commit" value="3f2a"' in html
    assert "1 filter value could not be used" in html
    assert ">Bad request<" not in html


def options(html: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}">(.*?)</select>', html, re.S)
    assert select, f"no select {name}"
    return re.findall(r'<option value="([^"]*)"', select.group(1))[1:]  # after "all"


def test_the_selects_list_the_versions_models_and_tags_present(
    viewer_client: Client, runs: dict[str, Run]
) -> None:
    html = viewer_client.get(reverse("run_list")).text
    assert options(html, "version") == ["v1", "v10", "v2"]
    assert options(html, "model") == ["claude-sonnet-4", "gpt-4o", "gpt-4o-mini"]
    assert options(html, "tag") == [
        "Prod",
        "baseline",
        "eu",
        "naïve &quot;quoted&quot;",
        "prod",
        "production",
    ]


def test_the_filter_form_shows_the_chosen_values_and_the_pager_keeps_them(
    viewer_client: Client, project: AgentProject
) -> None:
    for _ in range(RUNS_PER_PAGE + 1):
        make_run(project, version="v2", tags=["eu"], model="gpt-4o")
    params = {"version": "v2", "tag": "eu", "model": "gpt-4o", "min_pass": "40", "q": "gpt"}
    html = viewer_client.get(reverse("run_list"), {**params, "since": "2025-03-01"}).text
    assert '<option value="v2" selected>' in html
    assert '<option value="eu" selected>' in html
    assert '<option value="gpt-4o" selected>' in html
    assert 'name="min_pass" type="number" min="0" max="100" step="any" value="40"' in html
    assert 'value="2025-03-01" type="date"' in html
    assert 'name="q" value="gpt"' in html
    assert "version=v2&amp;tag=eu&amp;model=gpt-4o&amp;min_pass=40&amp;q=gpt" in html
    assert "page=2" in html


def test_a_value_absent_from_the_runs_stays_selected_rather_than_dropped(
    viewer_client: Client, runs: dict[str, Run]
) -> None:
    html = viewer_client.get(reverse("run_list"), {"version": "v9"}).text
    assert '<option value="v9" selected>v9</option>' in html
    assert "No runs match." in html


def test_the_table_shows_each_runs_model_and_prompt_version(
    viewer_client: Client, runs: dict[str, Run]
) -> None:
    html = viewer_client.get(reverse("run_list"), {"version": "v2"}).text
    assert "<th>Model</th><th>Prompt</th>" in html
    assert "claude-sonnet-4" in html and "gpt-4o-mini" in html
    assert '<span class="chip chip-muted">production</span>' in html


def count_queries(client: Client, params: dict[str, str]) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("run_list"), params)
    assert response.status_code == 200
    return len(captured)


def test_the_list_and_its_selects_cost_the_same_queries_for_two_or_many_runs(
    viewer_client: Client, project: AgentProject
) -> None:
    every_filter = {
        "project": str(project.pk),
        "status": "failed",
        "agent": project.name,
        "commit": "3f2a",
        "since": "2025-01-01",
        "until": "2025-12-31",
        "version": "v1",
        "model": "m1",
        "tag": "t1",
        "min_pass": "10",
        "q": "v",
    }
    make_run(project, version="v1", tags=["t1"], model="m1")
    make_run(project, version="v2", tags=["t2"], model="m2")
    few = (count_queries(viewer_client, {}), count_queries(viewer_client, every_filter))
    for index in range(RUNS_PER_PAGE + 10):
        make_run(project, version=f"v{index}", tags=[f"t{index}", "x"], model=f"m{index % 7}")
    many = (count_queries(viewer_client, {}), count_queries(viewer_client, every_filter))
    assert many == few
    assert max(many) <= LIST_BUDGET


def test_markup_in_a_version_tag_or_model_renders_as_text(
    viewer_client: Client, project: AgentProject
) -> None:
    evil = "<script>alert(1)</script>"
    make_run(project, version=evil, tags=[evil], model=evil)
    html = viewer_client.get(reverse("run_list")).text
    assert "<script>alert(1)" not in html
    # Three options (value and label each), the model and version cells, the tag chip.
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 9
    assert listed(viewer_client, {"tag": evil, "version": evil, "model": evil, "q": "<script"})


def test_each_row_has_a_compare_box_in_a_plain_form_to_the_compare_page(
    viewer_client: Client, runs: dict[str, Run]
) -> None:
    html = viewer_client.get(reverse("run_list")).text
    form = re.search(r'<form method="get" action="([^"]+)" id="compare-form".*?</form>', html, re.S)
    assert form and form.group(1) == reverse("compare")
    for run in runs.values():
        assert f'name="runs" value="{run.pk}" data-compare-run="{run.pk}"' in form.group(0)
    assert 'type="submit"' in form.group(0)
    # The tray script is a file (the CSP allows no inline script), told its URLs by data-*.
    assert re.search(r'<script src="[^"]*/js/compare_tray\.js" data-compare-url="/compare/"', html)
    assert "<script>" not in html and " onclick=" not in html and "hx-on" not in html


def test_the_run_page_links_to_compare_with_baseline_and_offers_the_tray(
    viewer_client: Client, runs: dict[str, Run]
) -> None:
    run = runs["prod"]
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'href="{reverse("compare")}?runs={run.pk}">Compare with baseline</a>' in html
    assert f'data-compare-toggle="{run.pk}" hidden>+ compare</button>' in html
    assert "js/compare_tray.js" in html

"""The compare's one query object: what the runs refuse of it, and its query string."""

from __future__ import annotations

from runs.core.comparison.query import ComparisonQuery, checked


def test_a_metric_the_runs_lack_is_left_out_and_so_are_the_settings_that_need_it() -> None:
    query = ComparisonQuery(run_ids=[1, 2], metric="vibes", sort="delta", min_drop=0.2)

    kept, errors = checked(query, ["rouge"])

    assert (kept.metric, kept.sort, kept.min_drop) == ("", "case", None)
    assert set(errors) == {"metric", "sort", "min_drop"}
    assert errors["metric"].startswith("no metric “vibes” in these runs")


def test_a_metric_of_the_runs_keeps_its_sort_and_minimum_drop() -> None:
    query = ComparisonQuery(run_ids=[1, 2], metric="rouge", sort="delta", min_drop=0.2)

    assert checked(query, ["rouge"]) == (query, {})


def test_the_query_string_leaves_the_defaults_out() -> None:
    assert ComparisonQuery(run_ids=[3, 1]).state() == {
        "runs": "3,1",
        "baseline": "",
        "order": "",
        "kinds": "",
        "show": "",
        "sort": "",
        "metric": "",
        "min_drop": "",
        "q": "",
    }
    query = ComparisonQuery(
        run_ids=[1],
        chosen=1,
        kinds=["code", "tools"],
        order="commits",
        show="fixes",
        sort="delta",
        metric="rouge",
        min_drop=0.25,
        q="refund",
    )
    assert query.state(runs=[1, 2]) == {
        "runs": "1,2",
        "baseline": "1",
        "order": "commits",
        "kinds": "code,tools",
        "show": "fixes",
        "sort": "delta",
        "metric": "rouge",
        "min_drop": "0.25",
        "q": "refund",
    }

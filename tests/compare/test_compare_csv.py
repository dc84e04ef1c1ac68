"""A compare as CSV (the compare page's "Download CSV", ``GET /api/v1/compare.csv``): a row per
case and run (per repetition), the verdicts and the chosen metrics' scores, streamed a slice of
cases at a time."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.compare.reads import export as compare_export
from runs.core.comparison.csv_export import REVIEW_COLUMNS
from runs.models import AgentProject, CaseRow, MetricRow, Run
from tests.compare.compare_data import LOW_ROUGE, ThreeRuns, three_runs
from tests.web.factories import repeated_run

pytestmark = pytest.mark.django_db

SUBJECT = "Refunds: round to the cent, whatever the currency"
FORMULA = '=HYPERLINK("http://example.com")'


def csv_of(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def header_of(response: Any) -> list[str]:
    return next(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.fixture
def data(project: AgentProject) -> ThreeRuns:
    made = three_runs(project)
    Run.objects.filter(pk=made.middle.pk).update(git_subject=SUBJECT)
    runs = (made.oldest, made.middle, made.newest)
    CaseRow.objects.filter(run__in=runs, index=5).update(name=FORMULA)
    return made


def test_the_csv_has_a_row_per_case_and_run_with_its_verdicts_and_every_metrics_score(
    viewer_client: Client, data: ThreeRuns
) -> None:
    # Asked newest first: the columns are the compare page's, oldest first.
    asked = f"{data.newest.pk},{data.oldest.pk},{data.middle.pk}"
    response = viewer_client.get(reverse("compare_csv"), {"runs": asked, "show": "changed"})
    filename = f"compare-runs-{data.ids.replace(',', '-')}.csv"
    assert response["Content-Disposition"] == f'attachment; filename="{filename}"'
    rows = csv_of(response)
    assert list(rows[0]) == [
        "case_index",
        "case_name",
        "run_id",
        "commit",
        "commit_subject",
        "repetition",
        "outcome",
        "verdict:standard",
        "verdict:rag",
        "verdict:geval",
        "verdict:code",
        "verdict:tools",
        "turns",
        "execution_time_ms",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cost_usd",
        "agent_cost_usd",
        "judge_cost_usd",
        "cost_unpriced",
        "score:politeness",
        "score:refund_grader",
        "score:rouge",
        "delta:politeness",
        "delta:refund_grader",
        "delta:rouge",
        *REVIEW_COLUMNS,
    ]
    runs = [str(run.pk) for run in (data.oldest, data.middle, data.newest)]
    # Every case (show= chooses the page's rows, not the file's), by case, then run.
    assert [(row["case_index"], row["run_id"]) for row in rows] == [
        (str(index), run) for index in range(6) for run in runs
    ]
    by = {(int(row["case_index"]), int(row["run_id"])): row for row in rows}
    failed = by[(1, data.oldest.pk)]
    assert failed == {
        **failed,
        "case_name": "refund case 1",
        "commit": "a" * 40,
        "commit_subject": "",
        "repetition": "0",
        "outcome": "failed",
        "verdict:standard": "failed",
        "verdict:rag": "",
        "verdict:geval": "not_graded",
        "verdict:code": "failed",
        "verdict:tools": "failed",
        "turns": "3",
        "execution_time_ms": "3600",
        "score:politeness": "0.9",  # the turns that scored: the failed one's judge could not
        "score:refund_grader": "0.5",
        "score:rouge": "0.565",  # (0.82 + 0.31) / 2: its skipped last turn has no metric
    }
    assert by[(0, data.middle.pk)]["commit_subject"] == SUBJECT
    assert by[(0, data.middle.pk)]["outcome"] == "passed"
    assert by[(4, data.newest.pk)]["score:rouge"] == str(LOW_ROUGE)
    # A name a spreadsheet would run as a formula is written as text.
    assert by[(5, data.newest.pk)]["case_name"] == f"'{FORMULA}"


def test_kinds_and_metrics_choose_the_columns_and_an_unknown_metric_is_refused(
    viewer_client: Client, data: ThreeRuns
) -> None:
    url = reverse("compare_csv")
    header = header_of(viewer_client.get(url, {"runs": data.ids, "kinds": "tools,code"}))
    # The kinds' verdicts, and the metrics of the kinds.
    assert header[7:11] == ["verdict:code", "verdict:tools", "turns", "execution_time_ms"]
    assert header[-6:-4] == ["score:refund_grader", "delta:refund_grader"]
    chosen = {"runs": data.ids, "metric": ["rouge", "politeness"]}
    assert header_of(viewer_client.get(url, chosen))[-8:-4] == [
        "score:rouge",
        "score:politeness",
        "delta:rouge",
        "delta:politeness",
    ]
    refused = viewer_client.get(url, {"runs": data.ids, "metric": "nope"})
    assert refused.status_code == 400 and "no metric “nope”" in refused.text
    assert viewer_client.get(url, {"runs": "999999"}).status_code == 404
    assert viewer_client.get(url).status_code == 400
    anonymous = Client().get(url, {"runs": data.ids})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))


def test_a_lone_run_comes_with_its_baseline_and_a_repeated_case_with_a_row_per_repetition(
    viewer_client: Client, project: AgentProject
) -> None:
    before = repeated_run(project, [1.0, 0.0], repeats=3, seed=1, exact=True)
    after = repeated_run(project, [1.0, 0.5], repeats=3, seed=2, commit="b" * 40, minutes=5)
    rows = csv_of(viewer_client.get(reverse("compare_csv"), {"runs": after.pk}))
    assert [(row["case_index"], row["run_id"], row["repetition"]) for row in rows] == [
        (str(index), str(run.pk), str(repetition))
        for index in range(2)
        for run in (before, after)
        for repetition in range(3)
    ]
    assert {row["outcome"] for row in rows if row["case_index"] == "0"} == {"passed"}


def test_a_big_compare_is_read_a_slice_of_cases_at_a_time_in_a_few_queries_each(
    viewer_client: Client, data: ThreeRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = reverse("compare_csv")
    whole = b"".join(viewer_client.get(url, {"runs": data.ids}).streaming_content)  # type: ignore[attr-defined]
    monkeypatch.setattr(compare_export, "SLICE_ROWS", 6)  # 2 cases of the 3 runs a slice
    response: Any = viewer_client.get(url, {"runs": data.ids})
    with CaptureQueriesContext(connection) as read:
        sliced = b"".join(response.streaming_content)
    assert sliced == whole
    # The runs' repeats and models, their cases' first and last index, the baseline's scores,
    # then 3 slices of 4 queries (cases, scores, judges' costs, reviews).
    assert len(read.captured_queries) == 3 + 3 * 4


def test_each_row_has_its_tokens_its_cost_and_its_score_deltas_against_the_baseline(
    viewer_client: Client, data: ThreeRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  agent-model: {input: 1000, output: 1000}\n")
    monkeypatch.setenv("HOLODECK_PRICES", str(prices))
    priced = {"model": {"provider": "openai", "name": "agent-model"}}
    Run.objects.filter(pk__in=[data.oldest.pk, data.newest.pk]).update(config_snapshot=priced)
    unpriced = {"model": {"provider": "openai", "name": "mystery-model"}}
    Run.objects.filter(pk=data.middle.pk).update(config_snapshot=unpriced)
    judged = MetricRow.objects.filter(run=data.newest, turn__case__index=0)
    judged.filter(metric_name="politeness").update(judge_cost_usd=0.001)  # one per turn
    asked: dict[str, Any] = {"runs": data.ids, "baseline": data.oldest.pk, "metric": "rouge"}
    rows = csv_of(viewer_client.get(reverse("compare_csv"), asked))
    by = {(int(row["case_index"]), int(row["run_id"])): row for row in rows}

    newest = by[(0, data.newest.pk)]  # 100 + 20 tokens at $1,000 a million, 3 judges at $0.001
    assert [newest[name] for name in ("prompt_tokens", "completion_tokens", "total_tokens")] == [
        "100",
        "20",
        "120",
    ]
    assert [newest[name] for name in ("cost_usd", "agent_cost_usd", "judge_cost_usd")] == [
        "0.123",
        "0.12",
        "0.003",
    ]
    assert newest["cost_unpriced"] == ""
    middle = by[(0, data.middle.pk)]  # no price: no cost, never 0
    assert (middle["cost_usd"], middle["agent_cost_usd"]) == ("", "")
    assert middle["cost_unpriced"] == "mystery-model"
    # Against the baseline's score of the same case; none on the baseline's own rows.
    base = float(by[(4, data.oldest.pk)]["score:rouge"])
    assert by[(4, data.newest.pk)]["delta:rouge"] == repr(round(LOW_ROUGE - base, 6))
    assert float(by[(4, data.newest.pk)]["delta:rouge"]) < 0
    assert by[(4, data.middle.pk)]["delta:rouge"] == "0.0"
    assert by[(4, data.oldest.pk)]["delta:rouge"] == ""


def test_a_name_that_turns_into_a_formula_after_control_characters_is_written_as_text(
    viewer_client: Client, data: ThreeRuns
) -> None:
    names = {0: "\n=1+2", 2: "\t=1", 3: "\r@x", 4: " \x1b\u200b-2+3"}
    for index, name in names.items():
        CaseRow.objects.filter(run=data.newest, index=index).update(name=name)
    rows = csv_of(viewer_client.get(reverse("compare_csv"), {"runs": data.ids}))
    shown = {
        int(row["case_index"]): row["case_name"]
        for row in rows
        if row["run_id"] == str(data.newest.pk)
    }
    assert {index: shown[index] for index in names} == {
        index: f"'{name}" for index, name in names.items()
    }
    assert shown[1] == "refund case 1"


def test_the_api_gives_the_same_csv_and_refuses_what_the_page_refuses(
    viewer_client: Client, data: ThreeRuns
) -> None:
    page = viewer_client.get(reverse("compare_csv"), {"runs": data.ids, "metric": "rouge"})
    api = viewer_client.get("/api/v1/compare.csv", {"runs": data.ids.split(","), "metric": "rouge"})
    assert api["Content-Disposition"] == page["Content-Disposition"]
    assert csv_of(api) == csv_of(page)
    missing = viewer_client.get("/api/v1/compare.csv", {"runs": [999999]})
    assert missing.status_code == 404 and missing.json() == {"detail": "no run #999999"}
    unknown = viewer_client.get("/api/v1/compare.csv", {"runs": data.ids.split(","), "metric": "x"})
    assert unknown.status_code == 422


def test_the_compare_page_links_its_csv_with_its_settings(
    viewer_client: Client, data: ThreeRuns
) -> None:
    page = viewer_client.get(reverse("compare"), {"runs": data.ids, "kinds": "code"}).text
    link = f'href="{reverse("compare_csv")}?runs={data.ids.replace(",", "%2C")}&amp;kinds=code"'
    assert f'<a class="btn btn-small csv-link" {link} download' in page

"""Repeats: each case of a run runs N times as independent sessions, every repetition stored
as a case row of its own, counted apart, exported as a TestResult of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.models import CaseRow, Run
from runs.selectors.export import run_eval_run
from runs.services import execution, launch
from tests.web.factories import make_repetition_fail, make_user
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_launch_with_repeats_runs_every_case_that_many_times(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    run = launch.run_create(project=project, repeats=3)
    assert (run.total_cases, run.repeats) == (9, 3)
    assert run.total_turns == 30
    run = execution.run_execute_inline(run_id=run.pk)
    rows = list(run.cases.order_by("index", "repetition").values_list("index", "repetition"))
    assert rows == [(i, r) for i in range(3) for r in range(3)]
    assert not run.cases.exclude(status=CaseRow.Status.DONE).exists()
    assert run.turns_done == 30 and run.cases_done == 9
    # Each repetition has its own turns; the example's scripted agent answers the same.
    for case in run.cases.all():
        assert case.turns.count() == case.turn_count
    assert run.partial_text == ""  # every case ran (three times)
    assert ("repeats", "3") in run.launch_options

    names = [result.test_name for result in run_eval_run(run=run).report.results]
    assert len(names) == 9 and len(set(names)) == 9
    assert names[1].endswith("(repetition 2 of 3)")


def test_a_limited_repeated_run_is_partial_by_its_cases_not_its_rows(tmp_path: Path) -> None:
    run = launch.run_create(project=example_project(tmp_path), repeats=4, limit=2)
    assert run.total_cases == 8
    assert run.partial_text == "partial: 2 of 3 cases, limit 2"


def test_repeats_out_of_bounds_are_refused_at_their_field(tmp_path: Path) -> None:
    with pytest.raises(launch.LaunchError) as refused:
        launch.run_create(project=example_project(tmp_path), repeats=0)
    assert refused.value.field == "repeats"
    assert not Run.objects.exists()


def test_the_agent_yamls_execution_repeats_is_the_default(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    agent = project.agent_path
    agent.write_text(agent.read_text().replace("execution:\n", "execution:\n  repeats: 2\n", 1))
    run = launch.run_create(project=project)
    assert run.repeats == 2 and run.total_cases == 6


def test_run_agent_repeats_each_case_and_names_each_repetition_in_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = example_project(tmp_path)
    out = tmp_path / "report.json"
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--repeats", "2", "--output", str(out))
    run = Run.objects.get()
    assert run.repeats == 2 and run.cases.count() == 6 and run.cases_done == 6
    assert set(run.cases.values_list("repetition", flat=True)) == {0, 1}
    names = [result["test_name"] for result in json.loads(out.read_text())["report"]["results"]]
    assert len(names) == 6 and sum("(repetition 2 of 2)" in name for name in names) == 3
    err = capsys.readouterr().err
    assert "(repetition 2 of 2)" in err  # the progress says which repetition


def test_run_agent_refuses_repeats_out_of_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = example_project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        call_command("run_agent", str(project.agent_path), "--repeats", "0")
    assert exited.value.code == 2
    assert "--repeats 0: must be from 1 to 1000" in capsys.readouterr().err


def test_a_regrade_of_a_repeated_run_grades_every_repetition(tmp_path: Path) -> None:
    from runs.services.regrade import run_regrade_create

    run = execution.run_execute_inline(
        run_id=launch.run_create(project=example_project(tmp_path), repeats=2).pk
    )
    regrade = execution.run_execute_inline(
        run_id=run_regrade_create(original=run, enqueue=False).pk
    )
    assert regrade.repeats == 2 and regrade.cases.count() == 6
    assert not regrade.cases.filter(outcome="error").exists()
    graded = regrade.cases.order_by("index", "repetition").values_list("outcome", flat=True)
    assert list(graded) == list(
        run.cases.order_by("index", "repetition").values_list("outcome", flat=True)
    )


# --- the run page of a repeated run ----------------------------------------------------------


def flaky_example_run(tmp_path: Path, repeats: int = 3) -> Run:
    """The example run with each case repeated; case 0 then made flaky (its second repetition
    failed), as a stochastic agent would."""
    run = execution.run_execute_inline(
        run_id=launch.run_create(project=example_project(tmp_path), repeats=repeats).pk
    )
    return make_repetition_fail(run)


def row_indices(page: str) -> list[str]:
    """The case numbers of the rows a run page lists, in order."""
    return re.findall(r'class="idx">#(\d+)<', page)


def test_a_repeated_run_lists_each_case_once_with_its_repetitions_together(
    tmp_path: Path, client: Client
) -> None:
    run = flaky_example_run(tmp_path)
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run_detail", args=[run.pk])).text
    assert row_indices(page) == ["1", "2", "3"]  # one row per case, not one per repetition
    assert page.count('class="case case-group') == 3
    first = run.cases.get(index=0, repetition=0)
    row = re.search(rf'<details [^>]*id="case-{first.pk}".*?</summary>', page, re.S)
    assert row is not None
    assert "2/3 reps passed" in row.group(0) and "flaky-mark" in row.group(0)
    # Its verdict over the repetitions, as compare reads it: passed (2 of 3 passed).
    assert 'class="case case-group case-passed"' in row.group(0)
    assert page.count("flaky-mark") == 1 and page.count("3/3 reps passed") == 1
    assert 'class="case case-group case-failed"' in page  # the example's case 3: 0/3
    assert "3 cases" in page  # cases, not their 9 repetitions
    # The tile that counts the 9 rows says they are the cases' runs, not cases.
    assert re.search(
        r'tile-label">Case runs</span><span class="tile-value" data-count="cases">9/9', page
    )
    assert "3 cases × 3 repetitions" in page
    assert '<span data-repeat="flaky">1</span> of <span data-repeat="judged">3</span> cases' in page
    assert '<span data-repeat="complete">3</span> complete cases' in page
    assert "flaky only" in page


def test_a_repeated_runs_filters_count_and_list_cases_not_repetitions(
    tmp_path: Path, client: Client
) -> None:
    run = flaky_example_run(tmp_path)
    client.force_login(make_user("viewer"))
    url = reverse("run_detail", args=[run.pk])
    flaky = client.get(url, {"flaky": "1"}).text
    assert row_indices(flaky) == ["1"] and "1 case<" in flaky
    # Only failures: the cases any repetition of which failed, each once (the flaky case 1
    # and the example's failing case 3).
    failures = client.get(url, {"failures": "1"}).text
    assert row_indices(failures) == ["1", "3"] and "2 cases<" in failures
    name = run.cases.get(index=1, repetition=0).name
    found = client.get(url, {"q": name}).text
    assert row_indices(found) == ["2"] and "1 case matching" in found


def test_a_repeated_case_passes_when_more_than_half_its_graded_repetitions_passed(
    client: Client,
) -> None:
    from tests.web.factories import repeated_run

    run = repeated_run(None, [2 / 3, 1 / 3, 1, 0], repeats=3, seed=4, exact=True)
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run_detail", args=[run.pk])).text
    verdicts = re.findall(r'class="case case-group case-(\w+)"', page)
    assert verdicts == ["passed", "failed", "passed", "failed"]
    rates = re.findall(r"(\d/\d) reps passed", page)
    assert rates == ["2/3", "1/3", "3/3", "0/3"]
    assert page.count("flaky-mark") == 2


def test_a_repeated_runs_list_is_paged_by_case(client: Client) -> None:
    from runs.web.views import CASES_PER_PAGE
    from tests.web.factories import repeated_run

    run = repeated_run(None, [1.0] * (CASES_PER_PAGE + 5), repeats=2, seed=1, exact=True)
    client.force_login(make_user("viewer"))
    url = reverse("run_detail", args=[run.pk])
    page = client.get(url).text
    assert len(row_indices(page)) == CASES_PER_PAGE
    shown = f"{CASES_PER_PAGE} of {CASES_PER_PAGE + 5} shown"
    assert f"Load 5 more ({shown})" in page
    more = client.get(url, {"page": "2"}, headers={"HX-Request": "true"}).text
    assert row_indices(more) == [str(n) for n in range(CASES_PER_PAGE + 1, CASES_PER_PAGE + 6)]
    assert more.count("2/2 reps passed") == 5


def test_a_repetition_that_finishes_updates_its_cases_row_in_the_poll(client: Client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from tests.web.factories import repeated_run

    run = repeated_run(None, [1.0, 1.0], repeats=3, seed=1, exact=True)
    earlier = timezone.now() - timedelta(minutes=5)
    run.cases.update(started_at=earlier, finished_at=earlier)
    last = run.cases.get(index=1, repetition=2)
    CaseRow.objects.filter(pk=last.pk).update(
        status="running", outcome="", passed=None, finished_at=None
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, cases_done=5, finished_at=None)
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run_detail", args=[run.pk])).text
    assert "2/3 reps done" in page and "2/2 reps passed" in page
    since = timezone.now()

    # The third repetition fails: the poll swaps in its case's row, with the three counted.
    CaseRow.objects.filter(pk=last.pk).update(
        status="done", outcome="failed", passed=False, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=6)
    poll = client.get(
        reverse("run_progress", args=[run.pk]),
        {"since": since.isoformat(), "known": "2", "v": "running.6.5.6"},
        headers={"HX-Request": "true"},
    ).text
    first = run.cases.get(index=1, repetition=0)
    row = re.search(
        rf'<details [^>]*id="case-{first.pk}" hx-swap-oob="true".*?</summary>', poll, re.S
    )
    assert row is not None, poll
    assert "2/3 reps passed" in row.group(0) and "flaky-mark" in row.group(0)
    assert row_indices(poll) == ["2"]  # just the case that changed


def test_a_repeated_case_cancelled_while_a_repetition_runs_says_it_is_stopping(
    client: Client,
) -> None:
    from runs.services.launch import run_cancel
    from tests.web.factories import repeated_run

    run = repeated_run(None, [1.0, 1.0], repeats=3, seed=1, exact=True)
    running, waiting = (run.cases.get(index=1, repetition=r) for r in (1, 2))
    CaseRow.objects.filter(pk=running.pk).update(status="running", outcome="", passed=None)
    CaseRow.objects.filter(pk=waiting.pk).update(
        status="pending", outcome="", passed=None, started_at=None, finished_at=None
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, cases_done=4)
    assert run_cancel(run=Run.objects.get(pk=run.pk))
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run_detail", args=[run.pk])).text
    first = run.cases.get(index=1, repetition=0)
    row = re.search(rf'<details [^>]*id="case-{first.pk}".*?</summary>', page, re.S)
    assert row is not None
    assert "cancelled · stopping" in row[0] and "1 cancelled" in row[0]
    assert "1/1 reps passed" in row[0]


def test_a_repeated_case_shows_its_repetitions_and_its_turns_over_them(
    tmp_path: Path, client: Client
) -> None:
    run = flaky_example_run(tmp_path)
    client.force_login(make_user("viewer"))
    case = run.cases.get(index=0, repetition=0)
    turns = client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    siblings = run.cases.filter(index=0).order_by("repetition")
    for sibling in siblings:
        assert reverse("case_turns", args=[run.pk, sibling.pk]) in turns  # the switcher
    assert 'aria-current="true"' in turns
    assert "Over its 3 repetitions" in turns
    first = re.search(r"<tr class=\"row-flaky\">(.*?)</tr>", turns, re.S)
    assert first is not None and "turn 1 of" in first.group(1) and "2/3" in first.group(1)
    # In a run page's row, the fragment says in the row's header which repetition it shows.
    second = siblings[1]
    shown = client.get(reverse("case_turns", args=[run.pk, second.pk])).text
    header = re.search(
        rf'<span [^>]*id="case-{case.pk}-shown" hx-swap-oob="true">(.*?)</span>', shown
    )
    assert header is not None and "showing rep 2/3" in header[1] and "failed" in header[1]
    current = re.findall(r'<a class="chip rep-chip [^"]*current"[^>]*aria-current="true"', shown)
    assert len(current) == 1 and f"/cases/{second.pk}/" in current[0]
    # The case page has the switcher too, as plain links (no row to load into), and says which
    # repetition of which case it is (of the run's 3 cases, not its 9 repetitions).
    page = client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert reverse("case_detail", args=[run.pk, siblings[2].pk]) in page
    assert 'hx-target="closest .turns"' not in page and "-shown" not in page
    assert "case 1 of 3</span> <span" in page and "repetition 1 of 3" in page


def test_a_run_without_repeats_shows_no_repetition_marks(tmp_path: Path, client: Client) -> None:
    run = execution.run_execute_inline(
        run_id=launch.run_create(project=example_project(tmp_path)).pk
    )
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run_detail", args=[run.pk])).text
    assert "rep 1/" not in page and "flaky only" not in page and "Repetitions" not in page


def test_exports_of_a_repeated_run_summarise_each_case_over_its_repetitions(
    tmp_path: Path,
) -> None:
    from runs.core.writers.results import export_text

    run = flaky_example_run(tmp_path)
    eval_run = run_eval_run(run=run)
    repetitions = eval_run.report.repetitions
    assert repetitions is not None and len(repetitions) == 3
    first = repetitions[0]
    assert (first.case_index, first.passed, first.failed, first.flaky) == (0, 2, 1, True)
    assert first.pass_at_k == 100 and first.pass_hat_k == 0  # k = 3: not all three pass
    data = json.loads(export_text(eval_run, "json"))
    assert data["report"]["repetitions"][0]["flaky"] is True
    markdown = export_text(eval_run, "markdown")
    assert "## Repetitions" in markdown and "1 of 3 cases flaky" in markdown
    # Still a HoloDeck-shaped file: the extension is left out of a HoloDeck dump.
    from runs.core.wire.models import holodeck_dump

    assert "repetitions" not in holodeck_dump(eval_run.report)


def test_the_cli_result_file_of_a_repeated_run_has_its_repetitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = example_project(tmp_path)
    out = tmp_path / "report.md"
    with pytest.raises(SystemExit):
        call_command(
            "run_agent", str(project.agent_path), "--repeats", "2", "--quiet", "--output", str(out)
        )
    text = out.read_text()
    assert "## Repetitions" in text and "Each case ran 2 times; 0 of 3 cases flaky" in text


def test_the_api_lists_each_repetition_and_filters_the_flaky_ones(
    tmp_path: Path, client: Client
) -> None:
    from runs.services.tokens import token_create

    run = flaky_example_run(tmp_path)
    _, secret = token_create(user=make_user("ci"), name="ci")
    auth = {"Authorization": f"Bearer {secret}"}
    rows = client.get(f"/api/v1/runs/{run.pk}/cases", headers=auth).json()["items"]
    assert [(row["index"], row["repetition"]) for row in rows][:4] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
    ]
    flaky = client.get(f"/api/v1/runs/{run.pk}/cases?flaky=true", headers=auth).json()["items"]
    assert {row["index"] for row in flaky} == {0} and len(flaky) == 3
    detail = client.get(f"/api/v1/runs/{run.pk}", headers=auth).json()
    assert detail["repeats"] == 3


def test_the_launch_form_takes_repeats_and_a_rerun_keeps_them(
    tmp_path: Path, client: Client
) -> None:
    project = example_project(tmp_path)
    client.force_login(make_user("lead", staff=True))
    form = client.get(reverse("project_launch", args=[project.pk])).text
    assert 'name="repeats"' in form and "execution.repeats" in form
    response = client.post(reverse("project_launch", args=[project.pk]), {"repeats": "4"})
    run = Run.objects.get()
    assert response.status_code == 302 and run.repeats == 4 and run.total_cases == 12
    again = client.get(reverse("project_launch", args=[project.pk]), {"rerun": run.pk}).text
    assert 'name="repeats" value="4"' in again
    refused = client.post(reverse("project_launch", args=[project.pk]), {"repeats": "0"})
    assert refused.status_code == 400 and Run.objects.count() == 1


def test_the_run_page_and_its_poll_read_the_stored_repetitions_stats_or_count_them_once(
    tmp_path: Path, client: Client
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = flaky_example_run(tmp_path)
    client.force_login(make_user("viewer"))
    stats_sql = 'SELECT "runs_caseresult"."index" AS "index", COUNT("runs_caseresult"."id") AS'
    urls = (
        reverse("run_detail", args=[run.pk]),
        reverse("run_progress", args=[run.pk]) + "?known=9&since=2000-01-01T00:00:00Z",
    )
    shown = {}
    # Stored when it ended (list_counts), then (a run that ended before they were) counted.
    for stored, expected_reads in ((True, 0), (False, 1)):
        if not stored:
            Run.objects.filter(pk=run.pk).update(list_counts=None)
        for url in urls:
            with CaptureQueriesContext(connection) as captured:
                page = client.get(url, headers={"HX-Request": "true"})
            assert page.status_code in (200, 286)
            reads = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(stats_sql)]
            assert len(reads) == expected_reads, url
            tile = re.search(r'<div class="tile repeat-tile">.*?</div>', page.text, re.S)
            shown.setdefault(url, set()).add(tile.group(0) if tile else "")
    assert all(len(tiles) == 1 for tiles in shown.values())  # the same tile either way

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.core.verdicts.kinds import KIND_LABELS
from runs.core.verdicts.numbers import format_rate
from runs.core.verdicts.outcomes import Outcome
from runs.models import AgentProject, CaseRow, MetricRow, Run, TurnRow
from runs.templatetags.dashboard import ago, mark, percent
from runs.web.views import CASES_PER_PAGE
from tests.web.factories import (
    RunSpec,
    build_run,
    failing_case,
    make_cancelled,
    make_legacy_turn,
    make_not_graded,
    make_project,
    running_case,
    write_turn,
)
from tests.web.one_record import Numbers, html_numbers

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def case_rows(html: str) -> int:
    return len(re.findall(r'id="case-\d+"', html))


def turn_sections(html: str) -> int:
    return html.count('<section class="turn')


VALID_AGENT = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: greeting
    input: Hi
    ground_truth: Hello
  - name: farewell
    input: Bye
    ground_truth: Goodbye
"""

BROKEN_AGENT = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: "bad <script>alert(1)</script>"
    turns: []
  - input: ""
    bogus: 1
"""


def agent_project(tmp_path: Path, text: str) -> AgentProject:
    (tmp_path / "agent.yaml").write_text(text)
    return AgentProject.objects.create(name="tiny", directory=str(tmp_path))


# --- access ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("home", {}),
        ("run_list", {}),
        ("run_detail", {"run_id": 1}),
        ("run_progress", {"run_id": 1}),
        ("case_detail", {"run_id": 1, "case_id": 1}),
        ("case_turns", {"run_id": 1, "case_id": 1}),
        ("project_launch", {"project_id": 1}),
    ],
)
def test_every_page_redirects_an_anonymous_visitor_to_login(
    client: Client, name: str, kwargs: dict[str, int]
) -> None:
    response = client.get(reverse(name, kwargs=kwargs))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_non_staff_user_cannot_open_or_post_the_launch_form(
    viewer_client: Client, project: AgentProject
) -> None:
    url = reverse("project_launch", args=[project.pk])
    assert viewer_client.get(url).status_code == 403
    assert viewer_client.post(url, {"git_ref": ""}).status_code == 403
    assert not Run.objects.exists()


def test_a_non_staff_user_cannot_cancel_a_run(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    response = viewer_client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_cancel_only_accepts_post(staff_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    assert staff_client.get(reverse("run_cancel", args=[run.pk])).status_code == 405


def test_staff_cancelling_a_running_run_calls_run_cancel_and_redirects(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    response = staff_client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_cancelling_with_htmx_redraws_the_page_in_place_with_its_filters_and_polls_on(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    case = running_case(run, 2, written=1)
    page = staff_client.get(reverse("run_detail", args=[run.pk])).text
    form = re.search(r'<form [^>]*class="inline cancel-form"[^>]*>', page)
    assert form is not None and f'hx-post="{reverse("run_cancel", args=[run.pk])}"' in form[0]

    page_url = f"http://testserver{reverse('run_detail', args=[run.pk])}?failures=1"
    response = staff_client.post(
        reverse("run_cancel", args=[run.pk]), headers={**HTMX, "HX-Current-URL": page_url}
    )
    assert response.status_code == 200  # no redirect: nothing reloads
    text = response.text
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.is_stopping
    # The progress box (the form's target) polls on, with the page's filter, while it stops.
    box = re.search(r'<section id="run-progress"[^>]*>', text)
    assert box is not None and 'hx-trigger="every 1s"' in box[0] and "failures=1&amp;" in box[0]
    assert re.search(r'<header id="run-header" class="run-header" hx-swap-oob="true">', text)
    assert 'data-status="cancelled"' in text and "Cancel run" not in text
    assert '<section id="case-list" class="case-list" hx-swap-oob="true">' in text
    assert f"Run {run.pk} cancelled." in text
    # The page's list: only failures (its failed case; not the passed or the running one).
    listed = set(re.findall(r'id="case-(\d+)"', text))
    assert listed == {str(failing_case(run).pk)} and str(case.pk) not in listed


def test_the_cancel_button_is_shown_to_staff_only_while_the_run_is_active(
    staff_client: Client, project: AgentProject
) -> None:
    active = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    finished = build_run(project)
    cancel_url = reverse("run_cancel", args=[active.pk])
    assert cancel_url in staff_client.get(reverse("run_detail", args=[active.pk])).text
    assert "Cancel run" not in staff_client.get(reverse("run_detail", args=[finished.pk])).text


def test_the_cancel_button_is_hidden_from_viewers(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    assert "Cancel run" not in viewer_client.get(reverse("run_detail", args=[run.pk])).text


# --- launch ---------------------------------------------------------------------------------


def test_launching_a_broken_agent_lists_every_problem_escaped_and_queues_nothing(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, BROKEN_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]), {"git_ref": "", "parallel": "2"}
    )
    assert response.status_code == 400
    html = response.text
    assert "3 problems" in html
    assert "turns must not be empty" in html
    assert "input must not be empty" in html
    assert "bogus: unknown field" in html
    assert "bad &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert not Run.objects.exists()


def test_launching_a_valid_agent_creates_a_queued_run_and_redirects_to_it(
    staff_client: Client, tmp_path: Path, staff: object
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]),
        {"git_ref": "", "parallel": "", "case_filter": "fare", "limit": ""},
    )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    assert run.status == Run.Status.QUEUED
    assert run.total_cases == 1  # the case filter kept "farewell" only
    assert run.created_by == staff


def test_a_launch_error_is_shown_inline(staff_client: Client, tmp_path: Path) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]), {"case_filter": "no-such-case"}
    )
    assert response.status_code == 400
    assert "no test case matches the filter" in response.text
    assert not Run.objects.exists()


def test_the_launch_form_rejects_a_parallelism_below_one(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    with mock.patch("runs.web.launch.run_create") as run_create:
        response = staff_client.post(
            reverse("project_launch", args=[project.pk]), {"parallel": "0"}
        )
    assert response.status_code == 400
    run_create.assert_not_called()


# --- projects and run list ------------------------------------------------------------------


def test_the_home_page_shows_each_project_with_its_last_run(
    viewer_client: Client, project: AgentProject
) -> None:
    build_run(project, RunSpec(status=Run.Status.PASSED, failing=()))
    last = build_run(project, RunSpec(status=Run.Status.FAILED, cases=4))
    make_project("empty-agent", "/srv/agents/empty")
    html = viewer_client.get(reverse("home")).text
    assert f'href="{reverse("run_detail", args=[last.pk])}"' in html
    assert "3/4 passed" in html
    assert "no runs yet" in html


def test_the_home_page_says_a_run_created_under_a_minute_ago_was_created_just_now(
    viewer_client: Client, project: AgentProject
) -> None:
    build_run(project)
    html = viewer_client.get(reverse("home")).text
    assert "just now" in html and "0\xa0minutes" not in html and "0 minutes" not in html


def test_a_time_ago_reads_just_now_under_a_minute_and_in_words_after() -> None:
    now = timezone.now()
    assert ago(now - timedelta(seconds=59), now) == "just now"
    assert ago(now + timedelta(seconds=5), now) == "just now"  # a clock a little ahead
    assert ago(now - timedelta(seconds=60), now) == "1\xa0minute ago"
    assert ago(now - timedelta(hours=2, minutes=3), now) == "2\xa0hours, 3\xa0minutes ago"
    assert ago(None) == ""


def test_the_home_page_escapes_what_users_wrote_and_marks_a_regrade(
    staff_client: Client, project: AgentProject
) -> None:
    original = build_run(project)
    regrade = build_run(project, regrade_of=original)
    AgentProject.objects.filter(pk=project.pk).update(
        name="<b>weather</b>", description="a & b " + "x" * 200
    )
    html = staff_client.get(reverse("home")).text
    assert (
        f'<strong><a href="/projects/{project.pk}/">&lt;b&gt;weather&lt;/b&gt;</a></strong>' in html
    )
    assert '<div class="muted small">a &amp; b xxx' in html and "x" * 150 not in html
    assert f'<a href="{reverse("run_detail", args=[regrade.pk])}">#{regrade.pk}</a>' in html
    assert f'data-regrade-of="{original.pk}"' in html
    assert f'href="{reverse("project_launch", args=[project.pk])}">Launch…</a>' in html
    assert f'href="{reverse("run_list")}?project={project.pk}">runs</a>' in html


def test_the_home_page_costs_the_same_queries_for_many_projects(
    viewer_client: Client, django_assert_max_num_queries: object
) -> None:
    for index in range(20):
        build_run(make_project(f"agent-{index}", f"/srv/{index}"), RunSpec(cases=1, turns=1))
    # Session, user, projects with their latest runs, the no-worker banner's one query, and the
    # user's roles in every project (one query, for the launch buttons).
    with django_assert_max_num_queries(6):  # type: ignore[operator]
        assert viewer_client.get(reverse("home")).status_code == 200


def test_the_run_list_filters_by_project_status_and_commit_prefix(
    viewer_client: Client, project: AgentProject
) -> None:
    other = make_project("other-agent", "/srv/other")
    mine = build_run(project, RunSpec(cases=1, turns=1, git_commit="abc123" + "0" * 34))
    passed = build_run(
        project, RunSpec(cases=1, turns=1, status=Run.Status.PASSED, git_commit="def456" + "0" * 34)
    )
    theirs = build_run(other, RunSpec(cases=1, turns=1, git_commit="abc999" + "0" * 34))

    def listed(query: str) -> set[int]:
        page = viewer_client.get(reverse("run_list") + query).context["page"]
        return {run.pk for run in page}

    assert listed("") == {mine.pk, passed.pk, theirs.pk}
    assert listed(f"?project={project.pk}") == {mine.pk, passed.pk}
    assert listed("?status=passed") == {passed.pk}
    assert listed("?commit=abc") == {mine.pk, theirs.pk}
    assert listed(f"?commit=ABC1&project={project.pk}") == {mine.pk}
    assert viewer_client.get(reverse("run_list") + "?status=bogus").status_code == 400


def test_the_run_list_pages_by_fifty(viewer_client: Client, project: AgentProject) -> None:
    Run.objects.bulk_create([Run(project=project, agent_name="a") for _ in range(51)])
    first = viewer_client.get(reverse("run_list"))
    assert len(first.context["page"]) == 50
    assert "page 1 of 2" in first.text
    assert len(viewer_client.get(reverse("run_list") + "?page=2").context["page"]) == 1


# --- run detail -----------------------------------------------------------------------------


def test_the_run_page_shows_its_summary_case_rows_and_metrics_per_turn_by_kind(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=10, turns=3))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]))
    html = response.text
    assert "10/10" in html and "30/30" in html
    # Case 1 fails: turn 1 failed (its judge could not grade), turn 2 skipped.
    assert html_numbers(html) == Numbers(
        cases={"passed": 9, "failed": 1},
        turns={"passed": 28, "failed": 1},
        metrics={
            "rouge": (29, 28, 1, 0),
            "politeness": (29, 28, 0, 1),
            "refund_grader": (29, 28, 1, 0),
        },
        pass_rate="90%",
    )
    assert "1 skipped" in html
    places = [html.index(KIND_LABELS[kind]) for kind in ("standard", "geval", "code")]
    assert places == sorted(places)  # grouped by kind, in the kinds' order
    assert "3 turns · 1/3 passed" in html  # the failing case's chip
    assert case_rows(html) == 10
    # Rows only: turn details are loaded when a row is expanded.
    assert "What is the refund" not in html
    assert reverse("case_turns", args=[run.pk, failing_case(run).pk]) in html


def test_only_failures_keeps_the_failed_case_rows(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=2, failing=(1, 4)))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?failures=1")
    assert [case.index for case in response.context["case_page"]] == [1, 4]
    partial = viewer_client.get(
        reverse("run_detail", args=[run.pk]) + "?failures=1",
        headers={**HTMX, "HX-Target": "case-list"},
    )
    assert partial.text.lstrip().startswith('<section id="case-list"')
    assert "<html" not in partial.text
    assert case_rows(partial.text) == 2


def test_a_filter_on_a_live_run_makes_its_poll_carry_the_new_filter(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=2, failing=(1,), status=Run.Status.RUNNING))
    partial = viewer_client.get(
        reverse("run_detail", args=[run.pk]) + "?outcome=error",
        headers={**HTMX, "HX-Target": "case-list"},
    )
    assert partial.text.lstrip().startswith('<section id="case-list"')
    # The progress box is swapped too (out of band), its poll asking for the filtered list: a
    # case finishing later, or the run's end, redraws the list the reader chose.
    progress = partial.text[partial.text.index('<section id="run-progress"') :]
    assert 'hx-swap-oob="true"' in progress.split(">", 1)[0]
    assert "outcome=error&amp;since=" in progress.split(">", 1)[0]
    # A finished run does not poll: the filter redraws the list alone.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, cases_done=6)
    done = viewer_client.get(
        reverse("run_detail", args=[run.pk]) + "?outcome=error",
        headers={**HTMX, "HX-Target": "case-list"},
    )
    assert 'id="run-progress"' not in done.text


def test_a_long_case_list_is_paged_with_a_load_more_button(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=CASES_PER_PAGE + 5, turns=1))
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert case_rows(html) == CASES_PER_PAGE
    assert "?page=2" in html
    assert f"Load 5 more ({CASES_PER_PAGE} of {CASES_PER_PAGE + 5} shown)" in html
    more = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?page=2", headers=HTMX)
    assert case_rows(more.text) == 5
    assert "<html" not in more.text
    assert "load-more" not in more.text  # the last page


def test_load_more_keeps_the_only_failures_filter_and_the_search(
    viewer_client: Client, project: AgentProject
) -> None:
    failing = range(1, 2 * CASES_PER_PAGE + 10, 2)
    run = build_run(project, RunSpec(cases=2 * CASES_PER_PAGE + 10, turns=1, failing=failing))
    url = reverse("run_detail", args=[run.pk])
    html = viewer_client.get(url, {"failures": "1", "q": "failing"}).text
    assert case_rows(html) == CASES_PER_PAGE
    assert "?failures=1&amp;q=failing&amp;page=2" in html
    more = viewer_client.get(url, {"failures": "1", "q": "failing", "page": "2"}, headers=HTMX)
    assert case_rows(more.text) == len(failing) - CASES_PER_PAGE
    assert "failing refund case" in more.text and ">refund case" not in more.text


def test_a_case_row_links_its_turns_and_its_page_and_escapes_its_name(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, status=Run.Status.RUNNING, done=2))
    CaseRow.objects.filter(run=run, index=0).update(name='<b onclick="x">"quoted" & more</b>')
    case = CaseRow.objects.get(run=run, index=0)
    pending = CaseRow.objects.get(run=run, index=2)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'hx-get="{reverse("case_turns", args=[run.pk, case.pk])}"' in html
    assert f'href="{reverse("case_detail", args=[run.pk, case.pk])}"' in html
    assert "&lt;b onclick=&quot;x&quot;&gt;&quot;quoted&quot; &amp; more&lt;/b&gt;" in html
    assert '<b onclick="x">' not in html
    assert f'<div class="case case-pending" id="case-{pending.pk}">' in html
    assert '<span class="chip chip-muted">2 turns</span>' in html


def test_expanding_a_case_renders_its_turns_as_a_fragment(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    response = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk]), headers=HTMX)
    html = response.text
    assert response.status_code == 200
    assert "<html" not in html
    assert turn_sections(html) == 3
    assert f'id="case-{case.pk}-turn-1"' in html  # unique when several cases are expanded
    assert "order_id" in html and "&quot;A-123&quot;" in html and "&quot;A-999&quot;" in html
    assert "no call of orders_lookup matched every argument" in html
    assert "could not grade" in html and "judge returned invalid JSON" in html
    assert "skipped" in html and "two consecutive session errors" in html
    assert '<span class="j-key">note</span>' in html  # grader details tree
    assert "<details" in html  # the long tool result is collapsed


def test_a_case_of_another_run_is_not_found(viewer_client: Client, project: AgentProject) -> None:
    run, other = build_run(project), build_run(project)
    case = failing_case(other)
    assert viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).status_code == 404
    assert viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).status_code == 404


def test_the_case_page_renders_expanded_with_anchors_for_each_turn(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    html = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "<html" in html
    assert f'href="{reverse("case_detail", args=[run.pk, case.pk])}#turn-2"' in html
    assert 'id="turn-2"' in html


def test_the_case_page_and_the_run_page_number_turns_and_cases_from_one(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=3, failing=(1,)))
    case = failing_case(run)
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert '<span class="small muted case-number">case 2 of 4</span>' in page
    assert '#turn-1">turn 1 of 3</a>' in page  # the anchors count from 1 too
    assert '#turn-3">turn 3 of 3</a>' in page
    assert "#turn-0" not in page
    assert ">turn 0<" not in page
    turns = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    link = reverse("case_detail", args=[run.pk, case.pk])
    assert f'href="{link}#turn-2">turn 2 of 3</a>' in turns
    rows = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert '<span class="idx">#1</span>' in rows and '<span class="idx">#4</span>' in rows
    assert '<span class="idx">#0</span>' not in rows


def test_an_unnamed_case_is_called_case_n_from_one(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    CaseRow.objects.filter(run=run, index=0).update(name="")
    case = CaseRow.objects.get(run=run, index=0)
    assert case.label == "case 1"
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "<title>case 1 · Run" in page


def test_a_json_response_is_shown_formatted(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(texts={"response": '{"refund": 42, "currency": "EUR"}'}))
    case = failing_case(run)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert '<pre class="json">{\n  &quot;refund&quot;: 42,' in html


def test_a_markdown_response_is_rendered(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    html = viewer_client.get(reverse("case_turns", args=[run.pk, run.cases.get().pk])).text
    assert "<strong>42.00 EUR</strong>" in html


# --- live progress --------------------------------------------------------------------------


def test_a_run_with_no_turn_done_yet_polls_every_250_ms_and_every_second_once_one_is_in(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=2, status=Run.Status.RUNNING, done=0))
    Run.objects.filter(pk=run.pk).update(turns_done=0, cases_done=0)
    detail = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert 'hx-trigger="every 250ms"' in detail and "every 1s" not in detail
    Run.objects.filter(pk=run.pk).update(turns_done=1)
    url = reverse("run_progress", args=[run.pk])
    polled = viewer_client.get(url, {"known": "2"}, headers=HTMX)
    assert 'hx-trigger="every 1s"' in polled.text and "every 250ms" not in polled.text


def test_progress_polls_while_running_and_stops_with_286_when_finished(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    detail = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert 'hx-trigger="every 1s"' in detail
    url = reverse("run_progress", args=[run.pk])
    running = viewer_client.get(
        url, {"known": "4", "since": "2020-01-01T00:00:00+00:00"}, headers=HTMX
    )
    assert running.status_code == 200
    assert 'hx-trigger="every 1s"' in running.text
    assert "1/4 cases" in running.text and "2/8 turns" in running.text
    assert "25%" in running.text

    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.PASSED, cases_done=4, turns_done=8, passed_cases=3
    )
    finished = viewer_client.get(url, {"known": "4"}, headers=HTMX)
    assert finished.status_code == 286
    assert "every 1s" not in finished.text
    assert "100%" in finished.text
    assert 'id="case-list" class="case-list" hx-swap-oob="true"' in finished.text


def test_progress_swaps_in_only_the_cases_finished_since_the_last_poll(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    first = viewer_client.get(reverse("run_detail", args=[run.pk]))
    since = str(first.context["poll_since"])
    CaseRow.objects.filter(run=run, index=0).update(finished_at="2000-01-01T00:00:00Z")
    case = CaseRow.objects.get(run=run, index=2)
    CaseRow.objects.filter(pk=case.pk).update(status="done", passed=True, turns_passed=2)
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "4", "since": since}, headers=HTMX
    )
    assert response.status_code == 200
    assert f'id="case-{case.pk}" hx-swap-oob="true"' not in response.text  # not finished yet
    from django.utils import timezone

    CaseRow.objects.filter(pk=case.pk).update(finished_at=timezone.now())
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "4", "since": since}, headers=HTMX
    )
    assert f'id="case-{case.pk}" hx-swap-oob="true"' in response.text
    assert response.text.count("hx-swap-oob") == 3  # header, tiles, the one case row


def test_progress_rerenders_the_case_list_when_cases_appear(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1, status=Run.Status.RUNNING, done=0))
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "0", "since": "2020-01-01T00:00:00Z"}
    )
    assert response.status_code == 200
    assert 'id="case-list" class="case-list" hx-swap-oob="true"' in response.text


def poll_url(client: Client, run: Run) -> str:
    """The URL the run page polls (``#run-progress``'s hx-get), as the browser reads it."""
    page = client.get(reverse("run_detail", args=[run.pk])).text
    found = re.search(r'id="run-progress"[^>]*?hx-get="([^"]+)"', page, re.S)
    assert found, "the page does not poll"
    return html.unescape(found.group(1))


def finish_case(run: Run, index: int, **counters: object) -> CaseRow:
    from django.utils import timezone

    CaseRow.objects.filter(run=run, index=index).update(
        status="done", outcome="passed", passed=True, turns_passed=2, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(**counters)
    return CaseRow.objects.get(run=run, index=index)


def test_a_poll_when_nothing_changed_is_a_204_that_swaps_nothing(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    url = poll_url(viewer_client, run)
    assert "v=running.4.1.2" in url

    response = viewer_client.get(url, headers=HTMX)

    assert response.status_code == 204
    assert response.content == b""


def test_a_poll_after_a_case_finished_swaps_its_row_and_the_tiles_but_not_the_header(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    url = poll_url(viewer_client, run)
    case = finish_case(run, 2, cases_done=2, turns_done=4, passed_cases=2)

    response = viewer_client.get(url, headers=HTMX)

    assert response.status_code == 200
    assert (
        f'<details class="case case-passed" id="case-{case.pk}" hx-swap-oob="true"' in response.text
    )
    assert 'id="run-tiles" class="tiles" hx-swap-oob="true"' in response.text
    assert 'id="run-header"' not in response.text  # still running: the header did not change
    assert 'id="case-list"' not in response.text
    assert "2/4 cases" in response.text
    assert "v=running.4.2.4" in html.unescape(response.text)  # the next poll's version
    assert viewer_client.get(poll_url(viewer_client, run), headers=HTMX).status_code == 204


def test_a_running_runs_live_summary_is_recounted_by_the_poll_at_most_every_few_seconds(
    viewer_client: Client, project: AgentProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.web import run_page

    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    url = poll_url(viewer_client, run)
    finish_case(run, 1, cases_done=2, turns_done=4, passed_cases=2)
    with CaptureQueriesContext(connection) as first:
        assert viewer_client.get(url, headers=HTMX).status_code == 200
    # Cases, turns, the turns not run yet, their tool verdicts and metrics (read now: a request
    # resets the log).
    assert counted(first) == 5
    url = poll_url(viewer_client, run)
    finish_case(run, 2, cases_done=3, turns_done=6, passed_cases=3)
    with CaptureQueriesContext(connection) as cached:
        response = viewer_client.get(url, headers=HTMX)
    # The metrics were not counted again; the cases and turns were (the tiles and the progress
    # box read them, and they add up at every poll).
    assert counted(cached) == 3
    assert response.status_code == 200
    assert "3/4 cases" in response.text and 'data-count="cases">3/4<' in response.text

    monkeypatch.setattr(run_page, "LIVE_SUMMARY_SECONDS", 0.0)
    with CaptureQueriesContext(connection) as recounted:
        assert viewer_client.get(url, headers=HTMX).status_code == 200
    assert counted(recounted) == 5


def counted(queries: Any) -> int:
    """How many of the captured queries count rows by outcome (the live summary's; the cost's
    sums of tokens, also grouped, read the usage columns)."""
    return sum(
        "GROUP BY" in query["sql"] and "_usage" not in query["sql"]
        for query in queries.captured_queries
    )


def test_a_poll_after_the_run_finished_swaps_the_header_and_stops_polling(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=3))
    url = poll_url(viewer_client, run)
    finish_case(run, 3, status=Run.Status.PASSED, cases_done=4, turns_done=8)

    response = viewer_client.get(url, headers=HTMX)

    assert response.status_code == 286
    assert 'id="run-header" class="run-header" hx-swap-oob="true"' in response.text
    assert 'data-status="passed"' in response.text
    assert "every 1s" not in response.text


def test_a_poll_with_more_finished_cases_than_a_page_redraws_the_first_page_of_the_list(
    viewer_client: Client, project: AgentProject
) -> None:
    from django.utils import timezone

    cases = CASES_PER_PAGE + 10
    run = build_run(project, RunSpec(cases=cases, turns=1, status=Run.Status.RUNNING, done=0))
    url = poll_url(viewer_client, run)
    CaseRow.objects.filter(run=run).update(
        status="done", outcome="passed", passed=True, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=cases, turns_done=cases)

    response = viewer_client.get(url, headers=HTMX)

    assert response.status_code == 200
    assert 'id="case-list" class="case-list" hx-swap-oob="true"' in response.text
    assert case_rows(response.text) == CASES_PER_PAGE


def test_a_finished_run_downloads_as_a_holodeck_result_file(
    viewer_client: Client, project: AgentProject
) -> None:
    from runs.core.wire.holodeck_io import load_eval_runs

    run = build_run(project, RunSpec(cases=3, turns=2))
    response = viewer_client.get(reverse("run_export", args=[run.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    (eval_run,) = load_eval_runs(response.json())
    assert eval_run.report.summary.total_tests == 3
    assert all(len(result.turns or []) == 2 for result in eval_run.report.results)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_export", args=[run.pk]) in page


# --- launch form: agent preview, field errors ------------------------------------------------


def test_the_launch_form_shows_the_agents_cases_parallelism_and_case_names(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    html = staff_client.get(reverse("project_launch", args=[project.pk])).text
    assert "2 test cases (2 turns) · default parallelism 1" in html
    assert "Empty: the agent&#x27;s default, 1" in html
    assert 'list="case-names"' in html
    assert '<datalist id="case-names"><option value="greeting"><option value="farewell">' in html


def test_the_launch_form_shows_config_problems_on_get(staff_client: Client, tmp_path: Path) -> None:
    project = agent_project(tmp_path, BROKEN_AGENT)
    response = staff_client.get(reverse("project_launch", args=[project.pk]))
    assert response.status_code == 200
    assert "The agent.yaml has 3 problems" in response.text
    assert "cannot be launched until they are fixed" in response.text
    assert "turns must not be empty" in response.text
    assert "<script>alert(1)</script>" not in response.text


def test_help_texts_and_errors_are_the_targets_of_aria_describedby(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    html = staff_client.post(reverse("project_launch", args=[project.pk]), {"parallel": "0"}).text
    described = re.search(r"<input[^>]*id=\"id_parallel\"[^>]*>", html)
    assert described is not None
    assert 'aria-invalid="true"' in described.group(0)
    assert 'aria-describedby="id_parallel_helptext id_parallel_error"' in described.group(0)
    assert 'id="id_parallel_helptext"' in html and 'id="id_parallel_error"' in html
    assert 'id="id_git_ref_helptext"' in html


def test_a_filter_matching_nothing_lists_valid_case_names(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    html = staff_client.post(
        reverse("project_launch", args=[project.pk]), {"case_filter": "nope"}
    ).text
    errors = html[html.index('id="id_case_filter_error"') :]
    assert "no test case matches the filter" in errors
    assert "Valid case names include:" in errors
    assert '<span class="mono">greeting</span>, <span class="mono">farewell</span>' in errors


@pytest.mark.parametrize("git_ref", ["no-such-branch", "0123456789abcdef"])
def test_a_bad_git_ref_is_reported_at_the_git_ref_field(
    staff_client: Client, tmp_path: Path, git_ref: str
) -> None:
    import subprocess

    project = agent_project(tmp_path, VALID_AGENT)
    repo = Path(project.directory)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "agent"]):
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x", *args],
            check=True,
        )
    response = staff_client.post(reverse("project_launch", args=[project.pk]), {"git_ref": git_ref})
    assert response.status_code == 400
    html = response.text
    assert "The run was not started" not in html
    field_error = html[html.index('id="id_git_ref_error"') :]
    assert f"git ref &#x27;{git_ref}&#x27; is not a commit" in field_error[:300]
    assert not Run.objects.exists()


# --- run page: outcomes, tiles, search --------------------------------------------------------


def test_the_pages_format_pass_rates_with_the_one_formatter() -> None:
    assert percent is format_rate  # runs.core.verdicts.numbers
    # One decimal that never rounds to a whole 100 or 0; "–" for no pass rate, never "0%".
    assert [percent(v) for v in (100.0, 90.0, 87.5, 66.6666, 99.96, 0.04, 0.0, None)] == [
        "100%",
        "90%",
        "87.5%",
        "66.7%",
        "99.9%",
        "0.1%",
        "0%",
        "–",
    ]


def test_a_case_failed_only_by_errored_metrics_is_shown_as_not_graded(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=(1,)))
    case = make_not_graded(run, index=0)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    row = re.search(rf'<details class="case case-([\w-]+)" id="case-{case.pk}".*?</details>', html)
    assert row is not None and row.group(1) == "not_graded"
    assert '<span class="chip chip-not_graded">not graded</span>' in row.group(0)
    assert '<span class="sr-only">not graded</span>' in row.group(0)
    real = run.cases.get(index=1)
    assert f'<details class="case case-failed" id="case-{real.pk}"' in html  # a real failure
    assert html_numbers(html).cases == {"passed": 2, "failed": 1, "not_graded": 1}
    assert html_numbers(html).pass_rate == "66.7%"  # not graded is left out of the pass rate

    turns = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert '<section class="turn turn-not_graded"' in turns
    assert '<section class="turn turn-passed"' in turns
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "not graded" in page.split('<div class="case-turns">')[0]  # the case header
    assert html_numbers(page).turns == {"passed": 1, "not_graded": 1}


def test_a_turn_failed_by_its_tools_is_failed_even_when_a_judge_errored(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)  # its second turn: tool assertion failed, and the judge errored
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert f'<section class="turn turn-failed" id="case-{case.pk}-turn-2"' in html
    assert "turn-not_graded" not in html


def test_cancelled_cases_get_a_grey_not_run_chip_and_the_tiles_count_them(
    viewer_client: Client, project: AgentProject
) -> None:
    run = make_cancelled(project=project)
    cancelled = run.cases.get(index=3)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    row = re.search(rf'<details class="case ([\w-]+)" id="case-{cancelled.pk}".*?</details>', html)
    assert row is not None and row.group(1) == "case-cancelled"
    assert '<span class="chip chip-cancelled">cancelled · not run</span>' in row.group(0)
    assert "case-failed" not in html
    assert '<span class="count-cancelled">2 cancelled</span>' in html
    assert 'class="progress progress-cancelled"' in html
    page = viewer_client.get(reverse("case_detail", args=[run.pk, cancelled.pk])).text
    assert "Not run — the run was cancelled." in page
    assert "No turn recorded yet" not in page


def test_the_cancel_button_asks_for_confirmation(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    html = staff_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'data-confirm="Cancel run #{run.pk}?' in html
    assert "onsubmit" not in html  # no inline handler: the page's CSP would block it


def test_the_tokens_tile_shows_a_dash_when_no_usage_was_recorded(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1))
    Run.objects.filter(pk=run.pk).update(total_tokens=0, prompt_tokens=0, completion_tokens=0)
    response = viewer_client.get(reverse("run_detail", args=[run.pk]))
    html = response.text
    assert not response.context["has_tokens"]
    assert '<span class="tile-value" title="no token usage was recorded">–</span>' in html


def test_the_case_search_filters_names_case_insensitively_with_only_failures(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=12, turns=1, failing=(1, 11)))
    url = reverse("run_detail", args=[run.pk])

    def indices(query: str) -> list[int]:
        return [case.index for case in viewer_client.get(url + query).context["case_page"]]

    assert indices("?q=CASE+1") == [1, 10, 11]
    assert indices("?q=case+1&failures=1") == [1, 11]
    assert indices("?q=FAILING") == [1, 11]
    html = viewer_client.get(url + "?q=case+1&failures=1").text
    assert 'value="case 1"' in html
    assert 'href="?q=case+1"' in html  # "all" keeps the search
    assert 'href="?q=case+1&amp;failures=1"' in html  # so does "only failures"
    assert "No case name contains" in viewer_client.get(url + "?q=zzz").text


def test_the_run_list_filters_by_agent_name_including_imported_runs(
    viewer_client: Client, project: AgentProject
) -> None:
    mine = build_run(project, RunSpec(cases=1, turns=1))
    imported = build_run(None, RunSpec(cases=1, turns=1), source=Run.Source.IMPORT)
    Run.objects.filter(pk=imported.pk).update(agent_name="legacy-agent")
    response = viewer_client.get(reverse("run_list") + "?agent=legacy-agent")
    assert [run.pk for run in response.context["page"]] == [imported.pk]
    assert response.context["agents"] == ["legacy-agent", "weather-agent"]
    assert '<option value="legacy-agent" selected>' in response.text
    assert mine.pk in {run.pk for run in viewer_client.get(reverse("run_list")).context["page"]}


# --- a case's turns ---------------------------------------------------------------------------


def test_a_tool_assertion_counts_its_matching_calls(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, failing_case(run).pk])).text
    assert "· 1 matching call (#0)" in html
    assert "· no matching call" in html
    assert "[0] matching" not in html


def test_the_turn_header_splits_agent_and_grading_time(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, failing_case(run).pk])).text
    assert "agent 1.2 s · grading 850 ms" in html


def test_the_judge_column_has_no_leading_separator_without_a_judge_model(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    MetricRow.objects.filter(run=run).update(model_used=None, retry_count=2)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, run.cases.get().pk])).text
    assert '<td class="small">2 retries · 850 ms</td>' in html
    assert '<td class="small"> · ' not in html


def test_an_imported_turn_without_invocations_shows_expected_and_called_tools(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    case = make_legacy_turn(run)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert 'expected <span class="mono">[search_orders, refund]</span>' in html
    assert 'called <span class="mono">[search_orders]</span>' in html
    assert "not matched" in html


def test_a_metric_passed_below_its_threshold_is_flagged(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    MetricRow.objects.filter(run=run, metric_name="rouge").update(score=0.2, threshold=0.5)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, run.cases.get().pk])).text
    assert html.count('title="passed per source file; score below threshold"') == 1


def test_long_errors_are_collapsed_and_short_ones_kept_verbatim(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    traceback = "Traceback (most recent call last):\n" + "  frame\n" * 30 + "ValueError: bad"
    TurnRow.objects.filter(case=case, index=1).update(errors=["short one", traceback])
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert '<pre class="err-text">short one</pre>' in html
    assert '<details class="err-long"><summary>Traceback (most recent call last):…' in html


def test_a_long_input_is_capped_behind_show_more(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    TurnRow.objects.filter(run=run).update(input="word " * 400)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, run.cases.get().pk])).text
    assert html.count('<div class="clamp">') == 1
    assert '<details class="clamp-toggle">' in html


def test_the_case_page_has_turn_chips_next_failed_link_and_collapsed_passing_details(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=3, failing=(1, 4)))
    first, second = run.cases.filter(passed=False).order_by("index")
    html = viewer_client.get(reverse("case_detail", args=[run.pk, first.pk])).text
    strip = html[html.index('<nav class="turn-strip"') :]
    strip = strip[: strip.index("</nav>")]
    # Numbered from 1 for people, and so are the anchors.
    assert 'href="#turn-1" title="turn 1 of 3">1<span class="v v-ok"' in strip
    assert 'href="#turn-2" title="turn 2 of 3">2<span class="v v-bad"' in strip
    assert "chip-skipped" in strip
    assert f'href="{reverse("case_detail", args=[run.pk, second.pk])}"' in html
    assert "next failed case" in html
    # Grader details: collapsed on the passing turn 0, open on the failed turn 1.
    assert html.count('<details class="block grader-block">') == 1
    assert html.count('<details class="block grader-block" open>') == 1
    last = viewer_client.get(reverse("case_detail", args=[run.pk, second.pk])).text
    assert "next failed case" not in last


def test_the_expanded_case_has_turn_chips_pointing_at_its_own_anchors(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert f'href="#case-{case.pk}-turn-1"' in html


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_mark_of_every_outcome_comes_from_the_one_vocabulary(outcome: Outcome) -> None:
    html = str(mark(outcome.value))
    assert html == (
        f'<span class="v {outcome.css}" title="{outcome.label}" aria-hidden="true">'
        f'{outcome.symbol}</span><span class="sr-only">{outcome.label}</span>'
    )
    assert mark("") == mark(None) == mark(Outcome.PENDING)  # no verdict yet
    assert 'title="errored"' in mark(Outcome.ERROR) and "v-err" in mark(Outcome.ERROR)


def test_verdicts_carry_words_for_screen_readers(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert '<span class="v v-ok" title="passed" aria-hidden="true">✓</span>' in html
    assert '<span class="sr-only">passed</span>' in html
    assert '<span class="sr-only">failed</span>' in html


# --- error pages and admin --------------------------------------------------------------------


def test_a_missing_page_renders_the_404_template_with_links(viewer_client: Client) -> None:
    response = viewer_client.get("/no/such/page/")
    assert response.status_code == 404
    assert "Not found" in response.text
    assert f'href="{reverse("run_list")}"' in response.text
    assert f'href="{reverse("home")}"' in response.text


def test_the_403_page_says_why(viewer_client: Client, project: AgentProject) -> None:
    response = viewer_client.get(reverse("project_launch", args=[project.pk]))
    assert response.status_code == 403
    assert (
        f"You need the runner role in project {project.name} to launch runs; ask a project admin."
        in response.text
    )


def test_the_500_page_renders_without_a_request_context(rf: object) -> None:
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))  # type: ignore[attr-defined]
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in html
    assert f'href="{reverse("run_list")}"' in html


def test_runs_and_cases_link_to_their_pages_from_the_admin(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1))
    case = run.cases.get(index=1)
    assert run.get_absolute_url() == reverse("run_detail", args=[run.pk])
    assert case.get_absolute_url() == reverse("case_detail", args=[run.pk, case.pk])


def test_the_launch_form_warns_when_llm_metrics_cannot_be_graded(
    staff_client: Client, tmp_path: Path
) -> None:
    from tests.web.services_helpers import example_project

    project = example_project(tmp_path, "support-bot")
    html = staff_client.get(reverse("project_launch", args=[project.pk])).text
    assert "⚠ LLM metrics judged by openai/gpt-4o-mini will not be graded" in html


@pytest.mark.parametrize(
    "params, field, message",
    [
        ({"q": "x" * 201}, "q", "is longer than 200 characters"),
        ({"failures": "maybe"}, "failures", "must be 1 or 0"),
    ],
)
def test_a_bad_case_filter_shows_the_run_page_with_the_error_at_its_field(
    viewer_client: Client, project: AgentProject, params: dict[str, str], field: str, message: str
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]), params)
    assert response.status_code == 400
    html = response.text
    assert f"Run #{run.pk}" in html and 'id="case-q"' in html
    assert f'<span class="field-error" id="{field}-error">{message}</span>' in html
    assert ">Bad request<" not in html


# --- live states: a running case, a cancelled run still stopping ------------------------------


def test_an_open_running_case_polls_for_its_turns_and_stops_once_it_settles(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=3, status=Run.Status.RUNNING, done=1))
    case = running_case(run, 1, written=1)
    url = reverse("case_turns", args=[run.pk, case.pk])
    first = viewer_client.get(url)
    assert turn_sections(first.text) == 1
    assert 'hx-trigger="every 1s"' in first.text and "v=running.1" in first.text
    assert "Turn 2 of 3 running…" in first.text
    assert viewer_client.get(url, {"v": "running.1"}).status_code == 204  # nothing new

    write_turn(case, 1)
    second = viewer_client.get(url, {"v": "running.1"})
    assert second.status_code == 200 and turn_sections(second.text) == 2
    assert "v=running.2" in second.text and "Turn 3 of 3 running…" in second.text

    write_turn(case, 2)
    CaseRow.objects.filter(pk=case.pk).update(status="done", outcome="passed", passed=True)
    settled = viewer_client.get(url, {"v": "running.2"})
    assert turn_sections(settled.text) == 3
    assert 'hx-trigger="every' not in settled.text and "running…" not in settled.text
    # The case page's own poll reloads the page instead (its header and tiles change too).
    reload = viewer_client.get(url, {"v": "running.2", "whole": "1"})
    assert reload.headers["HX-Refresh"] == "true"


def test_the_case_page_of_a_running_case_polls_its_turns_with_whole(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=3, status=Run.Status.RUNNING, done=1))
    case = running_case(run, 1, written=2)
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "v=running.2&amp;whole=1" in page
    assert turn_sections(page) == 2
    # A turn is written: the poll's fragment polls on as the case page's (it reloads the page
    # once the case settles), with the page's own anchors.
    write_turn(case, 2)
    url = reverse("case_turns", args=[run.pk, case.pk])
    polled = viewer_client.get(url, {"v": "running.2", "whole": "1"}, headers=HTMX).text
    assert turn_sections(polled) == 3 and "v=running.3&amp;whole=1" in polled
    assert 'id="turn-2"' in polled and f"case-{case.pk}-turn" not in polled


def test_a_cancelled_run_whose_case_still_runs_polls_until_the_case_stops(
    staff_client: Client, project: AgentProject
) -> None:
    from runs.recorder import case_cancel, run_settle
    from runs.services.launch import run_cancel

    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    case = running_case(run, 2, written=1)
    assert run_cancel(run=Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    assert (run.status, run.cases_done, run.cases_stopping) == ("cancelled", 3, 1)

    page = staff_client.get(reverse("run_detail", args=[run.pk])).text
    assert 'hx-trigger="every 1s"' in page  # still polling
    assert "stopping 1 case after its current turn" in page
    row = re.search(rf'<details class="case [\w-]+" id="case-{case.pk}".*?</details>', page, re.S)
    assert row is not None and "cancelled · stopping" in row.group(0)
    # Not downloadable nor re-gradable until it has stopped; no Cancel button any more.
    assert "Re-grade" not in page and "result file (JSON)" not in page
    assert reverse("run_cancel", args=[run.pk]) not in page
    # Its poll goes on: nothing new (204), not the end (286).
    assert staff_client.get(poll_url_of(page), headers=HTMX).status_code == 204
    poll = staff_client.get(reverse("run_progress", args=[run.pk]), headers=HTMX)
    assert poll.status_code == 200 and "every 1s" in poll.text

    # The case stops: the next poll renders the run as it ended, and stops polling.
    assert case_cancel(CaseRow.objects.get(pk=case.pk), running=True) and run_settle(run)
    final = staff_client.get(poll_url_of(page), headers=HTMX)
    assert final.status_code == 286 and "every 1s" not in final.text
    assert "cancelled · stopped" in final.text and "stopping" not in final.text.replace(
        "cancelled · stopped", ""
    )
    assert "4/4 cases" in final.text


def poll_url_of(page: str) -> str:
    found = re.search(r'id="run-progress"[^>]*?hx-get="([^"]+)"', page, re.S)
    assert found, "the page does not poll"
    return html.unescape(found.group(1))


def test_a_run_where_no_case_ran_offers_no_regrade(
    staff_client: Client, project: AgentProject
) -> None:
    run = make_cancelled(RunSpec(cases=3, turns=1, failing=(), done=0), project=project)
    page = staff_client.get(reverse("run_detail", args=[run.pk])).text
    assert "regrade-form" not in page and "Nothing to re-grade: no case of this run ran." in page
    ran = make_cancelled(project=project)
    assert "regrade-form" in staff_client.get(reverse("run_detail", args=[ran.pk])).text


def test_the_run_header_links_to_its_project_page(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'class="project-link" href="{reverse("project_detail", args=[project.pk])}"' in page

"""Projects in the browser (runs/web/projects.py, runs/services/projects.py): register from a
path (validated, every problem listed, nothing saved on error), the project page, edit,
remove (runs kept or deleted); and re-run: launch options on the run page, the partial badge,
the launch form filled in from a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs.core.runoptions import run_partial_text
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.services.launch import run_create
from runs.services.projects import ProjectError, project_register, project_remove
from tests.web.factories import RunSpec, build_run

AGENT = """\
name: tiny
description: Says hello and goodbye.
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: greeting
    input: Hi
    ground_truth: Hello
  - name: farewell
    input: Bye
    ground_truth: Goodbye
  - name: cash question
    input: How much cash?
    ground_truth: Plenty
"""

BROKEN = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: empty
    turns: []
  - input: ""
    bogus: 1
"""


def agent_dir(tmp_path: Path, text: str = AGENT) -> Path:
    (tmp_path / "agent.yaml").write_text(text)
    return tmp_path


# --- register -------------------------------------------------------------------------------


def test_registering_a_path_that_does_not_exist_says_so_at_the_path_field(
    staff_client: Client, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    response = staff_client.post(reverse("project_new"), {"path": str(missing), "name": ""})
    assert response.status_code == 400
    assert f"{missing} does not exist" in response.text
    assert 'id="id_path_error"' in response.text
    assert not AgentProject.objects.exists()


def test_registering_a_relative_path_is_refused(staff_client: Client) -> None:
    response = staff_client.post(reverse("project_new"), {"path": "agents/x", "name": ""})
    assert response.status_code == 400
    assert "not an absolute path" in response.text
    assert not AgentProject.objects.exists()


def test_registering_an_invalid_agent_lists_every_loader_problem_and_saves_nothing(
    staff_client: Client, tmp_path: Path
) -> None:
    directory = agent_dir(tmp_path, BROKEN)
    response = staff_client.post(reverse("project_new"), {"path": str(directory), "name": "x"})
    assert response.status_code == 400
    text = response.text
    assert "3 problems" in text
    assert "agent.yaml: test case &#x27;empty&#x27;: turns" in text
    assert "bogus: unknown field" in text
    assert "input must not be empty" in text
    assert not AgentProject.objects.exists()


def test_registering_a_directory_creates_the_project_with_the_agents_name_and_description(
    staff_client: Client, tmp_path: Path
) -> None:
    directory = agent_dir(tmp_path)
    response = staff_client.post(reverse("project_new"), {"path": str(directory), "name": ""})
    project = AgentProject.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("project_detail", args=[project.pk])
    assert (project.name, project.description) == ("tiny", "Says hello and goodbye.")
    assert project.agent_path == directory.resolve() / "agent.yaml"


def test_registering_with_a_name_keeps_the_agents_description(tmp_path: Path, db: None) -> None:
    project = project_register(agent_path=agent_dir(tmp_path) / "agent.yaml", name="mine")
    assert (project.name, project.description) == ("mine", "Says hello and goodbye.")


def test_registering_under_another_projects_name_is_refused(
    staff_client: Client, tmp_path: Path
) -> None:
    AgentProject.objects.create(name="tiny", directory="/srv/agents/other")
    response = staff_client.post(
        reverse("project_new"), {"path": str(agent_dir(tmp_path)), "name": ""}
    )
    assert response.status_code == 400
    assert "another project is called &#x27;tiny&#x27;" in response.text
    assert AgentProject.objects.get().directory == "/srv/agents/other"


def test_only_staff_can_register_edit_or_remove_a_project(
    viewer_client: Client, project: AgentProject
) -> None:
    for url in (
        reverse("project_new"),
        reverse("project_edit", args=[project.pk]),
        reverse("project_remove", args=[project.pk]),
    ):
        assert viewer_client.get(url).status_code == 403
    assert viewer_client.post(reverse("project_remove", args=[project.pk]), {"runs": "delete"})
    assert AgentProject.objects.filter(pk=project.pk).exists()


# --- edit and remove ------------------------------------------------------------------------


def test_editing_a_project_changes_its_name_and_description(
    staff_client: Client, project: AgentProject
) -> None:
    response = staff_client.post(
        reverse("project_edit", args=[project.pk]),
        {"name": "  storm-agent ", "description": "Forecasts."},
    )
    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.name, project.description) == ("storm-agent", "Forecasts.")


def test_editing_a_project_to_another_projects_name_says_so_at_the_name_field(
    staff_client: Client, project: AgentProject
) -> None:
    AgentProject.objects.create(name="taken", directory="/srv/agents/taken")
    response = staff_client.post(
        reverse("project_edit", args=[project.pk]), {"name": "taken", "description": ""}
    )
    assert response.status_code == 400
    assert 'id="id_name_error"' in response.text
    assert "another project is called &#x27;taken&#x27;" in response.text
    project.refresh_from_db()
    assert project.name == "weather-agent"


def test_removing_a_project_asks_what_becomes_of_its_runs_first(
    staff_client: Client, project: AgentProject
) -> None:
    build_run(project, RunSpec(cases=2, turns=1))
    page = staff_client.get(reverse("project_remove", args=[project.pk]))
    assert page.status_code == 200
    assert "It has 1 run." in page.text
    assert 'value="keep"' in page.text and 'value="delete"' in page.text
    unanswered = staff_client.post(reverse("project_remove", args=[project.pk]), {})
    assert unanswered.status_code == 400
    assert AgentProject.objects.filter(pk=project.pk).exists()


def test_removing_a_project_and_keeping_its_runs_leaves_them_reachable(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1))
    response = staff_client.post(reverse("project_remove", args=[project.pk]), {"runs": "keep"})
    assert response.status_code == 302
    assert not AgentProject.objects.exists()
    run.refresh_from_db()
    assert run.project_id is None
    assert staff_client.get(reverse("run_detail", args=[run.pk])).status_code == 200
    assert f"#{run.pk}" in staff_client.get(reverse("run_list")).text


def test_removing_a_project_and_deleting_its_runs_deletes_their_rows(
    staff_client: Client, project: AgentProject
) -> None:
    build_run(project, RunSpec(cases=3, turns=2), keep=True)
    other = build_run(None, RunSpec(cases=1, turns=1))
    response = staff_client.post(reverse("project_remove", args=[project.pk]), {"runs": "delete"})
    assert response.status_code == 302
    assert list(Run.objects.values_list("pk", flat=True)) == [other.pk]
    assert CaseRow.objects.count() == 1 and TurnRow.objects.count() == 1


def test_a_project_with_a_running_run_cannot_be_removed(project: AgentProject) -> None:
    build_run(project, RunSpec(status=Run.Status.RUNNING, done=1))
    with pytest.raises(ProjectError, match="queued or running: cancel it first"):
        project_remove(project=project, delete_runs=True)
    assert AgentProject.objects.filter(pk=project.pk).exists()


# --- the project page -----------------------------------------------------------------------


def test_the_project_page_shows_its_config_its_runs_by_status_and_its_pass_rates(
    staff_client: Client, tmp_path: Path
) -> None:
    project = project_register(agent_path=agent_dir(tmp_path), validate=True)
    passed = build_run(project, RunSpec(cases=3, turns=1, failing=(), status=Run.Status.PASSED))
    failed = build_run(project, RunSpec(cases=3, turns=1))
    html = staff_client.get(reverse("project_detail", args=[project.pk])).text
    assert "scripted tiny-script" in html
    assert '<dd data-config="cases">3 (3 turns)</dd>' in html
    assert reverse("project_launch", args=[project.pk]) in html
    assert f"{reverse('trends')}?project={project.pk}" in html
    assert html.count(f'href="{reverse("run_detail", args=[failed.pk])}"') >= 2
    only_passed = staff_client.get(
        reverse("project_detail", args=[project.pk]), {"status": "passed"}
    ).text
    runs_table = only_passed.split('id="runs-title"', 1)[1]
    assert f"#{passed.pk}<" in runs_table and f"#{failed.pk}<" not in runs_table


def test_a_bad_status_filter_on_the_project_page_is_a_bad_request(
    viewer_client: Client, project: AgentProject
) -> None:
    response = viewer_client.get(reverse("project_detail", args=[project.pk]), {"status": "nope"})
    assert response.status_code == 400


def test_the_home_page_and_the_run_list_link_the_project_page(
    viewer_client: Client, project: AgentProject
) -> None:
    build_run(project)
    url = reverse("project_detail", args=[project.pk])
    assert f'href="{url}"' in viewer_client.get(reverse("home")).text
    assert f'href="{url}"' in viewer_client.get(reverse("run_list")).text


# --- partial runs and re-run ----------------------------------------------------------------


def test_the_partial_badge_says_how_many_of_the_agents_cases_ran_and_the_filter() -> None:
    options = {"limit": None, "case_filter": "cash", "config_cases": 8}
    assert run_partial_text(options, total_cases=3) == "partial: 3 of 8 cases, filter 'cash'"
    assert run_partial_text({"limit": 2, "config_cases": 8}, total_cases=2) == (
        "partial: 2 of 8 cases, limit 2"
    )
    assert run_partial_text({"limit": 10, "config_cases": 8}, total_cases=8) == ""
    assert run_partial_text({}, total_cases=8) == ""  # an import: nothing is known


def test_a_limited_launch_is_badged_partial_in_lists_and_on_its_page(
    staff_client: Client, tmp_path: Path
) -> None:
    project = project_register(agent_path=agent_dir(tmp_path), validate=True)
    run = run_create(project=project, limit=1, case_filter="")
    badge = "partial: 1 of 3 cases, limit 1"
    page = staff_client.get(reverse("run_detail", args=[run.pk])).text
    assert badge in page
    assert badge in staff_client.get(reverse("run_list")).text
    assert badge in staff_client.get(reverse("home")).text
    assert badge in staff_client.get(reverse("project_detail", args=[project.pk])).text
    full = run_create(project=project)
    assert "partial:" not in staff_client.get(reverse("run_detail", args=[full.pk])).text


def test_the_run_page_lists_the_launch_options_and_links_a_re_run(
    staff_client: Client, tmp_path: Path
) -> None:
    project = project_register(agent_path=agent_dir(tmp_path), validate=True)
    run = run_create(project=project, limit=2, case_filter="e", parallel=3)
    html = staff_client.get(reverse("run_detail", args=[run.pk])).text
    launched = html.split('class="launched-with"', 1)[1].split("</p>", 1)[0]
    assert 'data-option="limit">limit <span>2</span>' in launched
    assert "filter <span>&#x27;e&#x27;</span>" in launched
    assert "parallel <span>3</span>" in launched
    assert "git ref <span>the working tree</span>" in launched
    rerun = f"{reverse('project_launch', args=[project.pk])}?rerun={run.pk}"
    assert f'href="{rerun}"' in html


def test_the_re_run_form_is_filled_in_with_the_runs_options(
    staff_client: Client, tmp_path: Path
) -> None:
    project = project_register(agent_path=agent_dir(tmp_path), validate=True)
    run = run_create(project=project, limit=2, case_filter="e", parallel=3)
    form = staff_client.get(reverse("project_launch", args=[project.pk]), {"rerun": run.pk})
    html = form.text
    assert form.status_code == 200
    assert 'name="limit" value="2"' in html
    assert 'name="case_filter" value="e"' in html
    assert 'name="parallel" value="3"' in html
    assert f'as <a href="{reverse("run_detail", args=[run.pk])}">run #{run.pk}</a>' in html


def test_a_re_run_of_another_projects_run_is_a_bad_request(
    staff_client: Client, tmp_path: Path, project: AgentProject
) -> None:
    mine = project_register(agent_path=agent_dir(tmp_path), validate=True)
    theirs = build_run(project)
    response = staff_client.get(reverse("project_launch", args=[mine.pk]), {"rerun": theirs.pk})
    assert response.status_code == 400


def test_a_finished_partial_run_is_badged_on_the_trends_page_and_the_project_series(
    viewer_client: Client, project: AgentProject
) -> None:
    options = {"limit": None, "case_filter": "cash", "config_cases": 8, "case_indices": [0]}
    build_run(project, RunSpec(cases=3, turns=1), options=options)
    badge = "partial: 3 of 8 cases, filter &#x27;cash&#x27;"
    trends = viewer_client.get(reverse("trends"), {"project": project.pk}).text
    assert badge in trends.split('class="grid trend-table"', 1)[1]
    page = viewer_client.get(reverse("project_detail", args=[project.pk])).text
    assert badge in page.split('id="trend-title"', 1)[1].split("</table>", 1)[0]


def test_register_project_with_a_name_keeps_the_agents_description(
    tmp_path: Path, db: None
) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("register_project", str(agent_dir(tmp_path)), "--name", "mine", stdout=out)
    project = AgentProject.objects.get()
    assert (project.name, project.description) == ("mine", "Says hello and goodbye.")
    assert out.getvalue().startswith("registered mine: ")


@pytest.mark.parametrize(
    "name", ["project_new", "project_detail", "project_edit", "project_remove"]
)
def test_the_project_pages_redirect_an_anonymous_visitor_to_login(
    client: Client, name: str
) -> None:
    kwargs = {} if name == "project_new" else {"project_id": 1}
    response = client.get(reverse(name, kwargs=kwargs))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_keeping_runs_imported_twice_from_one_file_is_refused_with_the_reason(
    project: AgentProject,
) -> None:
    build_run(project, RunSpec(cases=1, turns=1), source_hash="a" * 64)
    build_run(None, RunSpec(cases=1, turns=1), source_hash="a" * 64)
    with pytest.raises(ProjectError, match="imported from the same result file"):
        project_remove(project=project, delete_runs=False)
    assert AgentProject.objects.filter(pk=project.pk).exists()

"""The trends page: pass rate and metric averages of finished runs, in commit order, as SVG."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.core.verdicts.summary import OutcomeCounts
from runs.mapping import summary_of_rows
from runs.models import AgentProject, Run
from runs.services.history import runs_import
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import git

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
QUERY_BUDGET = 8
START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.UTC)


def make_run(
    project: AgentProject | None,
    *,
    day: int,
    commit: str = "3f2a9c1d0b7e4f6a8c9d0e1f2a3b4c5d6e7f8a9b",
    rate: float | None = 100.0,
    prompt: Any = None,
    model: str = "gpt-4o",
    branch: str = "main",
    status: str = Run.Status.PASSED,
    agent: str | None = None,
) -> Run:
    run = build_run(
        project,
        RunSpec(cases=2, turns=1, failing=(), status=status, git_commit=commit),
        created_at=START + timedelta(days=day),
        prompt_version=prompt,
        config_snapshot={"model": {"provider": "openai", "name": model}},
    )
    changes: dict[str, Any] = {"pass_rate": rate, "git_branch": branch}
    if status not in Run.ACTIVE:
        changes["summary"] = stored_summary(run, rate)
    if agent is not None:
        changes["agent_name"] = agent
    Run.objects.filter(pk=run.pk).update(**changes)
    return run


def stored_summary(run: Run, rate: float | None) -> dict[str, Any]:
    """The summary a run stores when it ends (its rows'), with case counts that make ``rate``
    its pass rate (None: no case graded)."""
    if rate is None:
        cases = OutcomeCounts(total=2, not_graded=2)
    else:
        passed = round(rate / 5)  # of 20 cases: every rate these tests use is a multiple of 5
        cases = OutcomeCounts(total=20, passed=passed, failed=20 - passed)
    summary = summary_of_rows(run.pk).model_copy(update={"cases": cases})
    assert summary.pass_rate == rate
    return summary.model_dump(mode="json")


def trends_page(client: Client, query: str) -> str:
    response = client.get(reverse("trends") + query)
    assert response.status_code == 200, response.content[:500]
    return response.text


def table_order(html: str) -> list[int]:
    table = html.split('<table class="grid trend-table">', 1)[1].split("</table>", 1)[0]
    return [int(run_id) for run_id in re.findall(r'<td><a href="/runs/(\d+)/">', table)]


@pytest.fixture
def repo_commits(tmp_path: Path) -> tuple[Path, list[str]]:
    """A git repository holding an agent directory, with three commits on main (oldest first)."""
    git(tmp_path, "init", "-q", "-b", "main")
    agent = tmp_path / "agent"
    agent.mkdir()
    commits = []
    for n in range(3):
        (agent / "agent.yaml").write_text(f"name: agent-{n}\n")
        git(tmp_path, "add", ".")
        git(tmp_path, "commit", "-q", "-m", f"commit {n}")
        commits.append(git(tmp_path, "rev-parse", "HEAD"))
    return agent, commits


def test_points_follow_the_first_parent_history_not_the_dates(
    viewer_client: Client, repo_commits: tuple[Path, list[str]]
) -> None:
    directory, (first, second, third) = repo_commits
    project = make_project("git-agent", str(directory))
    on_third = make_run(project, day=0, commit=third)
    on_first = make_run(project, day=1, commit=first)
    elsewhere = make_run(project, day=2, commit="d" * 40)  # not on main: placed by its date
    on_second = make_run(project, day=3, commit=second)

    html = trends_page(viewer_client, f"?project={project.pk}")

    assert table_order(html) == [on_first.pk, elsewhere.pk, on_second.pk, on_third.pk]
    assert "in commit order of HEAD" in html
    assert html.count('class="trend-point"') == 4


def test_without_a_git_repository_points_are_in_date_order(
    viewer_client: Client, project: AgentProject
) -> None:
    later = make_run(project, day=5)
    earlier = make_run(project, day=1)

    html = trends_page(viewer_client, f"?project={project.pk}")

    assert table_order(html) == [earlier.pk, later.pk]
    assert "in date order" in html


def test_only_finished_runs_are_drawn(viewer_client: Client, project: AgentProject) -> None:
    finished = [
        make_run(project, day=0, status=Run.Status.PASSED),
        make_run(project, day=1, status=Run.Status.FAILED, rate=50.0),
        make_run(project, day=2, status=Run.Status.ERROR, rate=None),
    ]
    for day, status in enumerate((Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.CANCELLED)):
        make_run(project, day=10 + day, status=status)

    html = trends_page(viewer_client, f"?project={project.pk}")

    assert table_order(html) == [run.pk for run in finished]
    # The errored run has no pass rate: a hollow point off the 0-100 % scale, not a 0 %.
    no_rate = re.search(r'<circle class="trend-no-rate[^"]*" cx="[\d.]+" cy="([\d.]+)"', html)
    zero = re.search(
        r'<line class="trend-grid"[^>]*y1="([\d.]+)"[^>]*/>\s*<text[^>]*>0</text>', html
    )
    assert no_rate is not None and zero is not None
    assert float(no_rate.group(1)) > float(zero.group(1))
    assert f"Run #{finished[2].pk} · error · no pass rate" in html
    assert re.search(
        rf'<tr data-run="{finished[2].pk}">.*?data-summary="pass_rate"[^>]*>–<', html, re.S
    )


def test_a_project_without_finished_runs_shows_the_empty_state(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(project, day=0, status=Run.Status.RUNNING)

    html = trends_page(viewer_client, f"?project={project.pk}")

    assert "No finished runs yet" in html
    assert "<svg" not in html


def test_markers_appear_where_the_prompt_version_or_the_model_changes(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(project, day=0, prompt={"version": "v1.1", "tags": []}, model="gpt-4o")
    make_run(project, day=1, prompt={"version": "v1.1", "tags": []}, model="gpt-4o")
    bumped = make_run(project, day=2, prompt={"version": "v1.2", "tags": []}, model="gpt-4o")
    switched = make_run(project, day=3, prompt={"version": "v1.2", "tags": []}, model="o3-mini")

    html = trends_page(viewer_client, f"?project={project.pk}")

    markers = re.findall(r'<g class="trend-marker"><title>(.*?)</title>', html, re.S)
    assert markers == [
        f"prompt v1.1 → v1.2 at #{bumped.pk}",
        f"model gpt-4o → o3-mini at #{switched.pk}",
    ]
    labels = re.findall(r'class="trend-marker-label"[^>]*>([^<]*)</text>', html)
    assert labels == ["v1.2", "o3-mini"]


def test_a_drop_beyond_the_margin_gets_a_callout_and_a_smaller_one_does_not(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(project, day=0, rate=90.0)
    small_drop = make_run(project, day=1, rate=85.0)
    big_drop = make_run(project, day=2, rate=70.0)

    html = trends_page(viewer_client, f"?project={project.pk}")

    assert f"\u221215 pts at #{big_drop.pk}" in html
    assert f"at #{small_drop.pk}</text>" not in html
    assert html.count('<g class="trend-callout">') == 1
    assert "Drops of more than 10 pts" in html

    finer = trends_page(viewer_client, f"?project={project.pk}&margin=4")
    assert f"\u22125 pts at #{small_drop.pk}" in finer
    assert finer.count('<g class="trend-callout">') == 2


def test_the_kind_filter_changes_which_metric_lines_are_drawn(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(project, day=0)
    make_run(project, day=1)

    every = trends_page(viewer_client, f"?project={project.pk}")
    only_standard = trends_page(viewer_client, f"?project={project.pk}&kinds=standard")
    two = trends_page(viewer_client, f"?project={project.pk}&kinds=standard&kinds=code")
    two_by_comma = trends_page(viewer_client, f"?project={project.pk}&kinds=code,standard")

    def drawn(html: str) -> list[str]:
        return re.findall(r'data-metric="([^"]+)"', html)

    assert drawn(every) == ["standard:rouge", "geval:politeness", "code:refund_grader"]
    assert drawn(only_standard) == ["standard:rouge"]
    assert drawn(two) == drawn(two_by_comma) == ["standard:rouge", "code:refund_grader"]
    rag = trends_page(viewer_client, f"?project={project.pk}&kinds=rag")
    assert drawn(rag) == []
    assert "No scored metric of the selected kinds (rag)" in rag


def test_the_branch_filter_keeps_the_runs_of_that_branch(
    viewer_client: Client, project: AgentProject
) -> None:
    on_main = make_run(project, day=0, branch="main")
    make_run(project, day=1, branch="feature/x")

    html = trends_page(viewer_client, f"?project={project.pk}&branch=main")

    assert table_order(html) == [on_main.pk]
    assert '<option value="feature/x">feature/x</option>' in html


def test_run_texts_in_the_chart_and_table_render_as_text(viewer_client: Client) -> None:
    make_run(None, day=0, agent=SCRIPT, prompt={"version": SCRIPT}, branch=SCRIPT, model=SCRIPT)
    make_run(None, day=1, agent=SCRIPT, prompt={"version": "v2"}, branch=SCRIPT, model="gpt-4o")

    response = viewer_client.get(reverse("trends"), {"agent": SCRIPT})

    html = response.text
    assert response.status_code == 200
    assert SCRIPT not in html
    assert "<script" not in html.split("<main>", 1)[1]
    assert f"Trends · {ESCAPED}" in html
    assert f"<td>{ESCAPED}</td>" in html  # branch and prompt version cells
    assert f"prompt {ESCAPED}" in html  # the hover title of a point
    assert f"model {ESCAPED} (openai) → gpt-4o" not in html  # markers show model names only
    assert f"model {ESCAPED} → gpt-4o" in html


def test_the_24_imported_holodeck_runs_draw_a_chart_of_24_points(
    viewer_client: Client, shared_dir: Path
) -> None:
    outcome = runs_import([shared_dir / "fixtures" / "holodeck" / "seed_runs.json"])
    assert len(outcome.imported) == 24

    html = trends_page(viewer_client, "?agent=customer-support")

    assert html.count('class="trend-point"') == 24
    assert len(table_order(html)) == 24
    assert "v1.2.1" in html and "gpt-4o" in html  # markers of a prompt and a model change
    assert re.findall(r'data-metric="standard:([^"]+)"', html) == ["bleu", "meteor", "rouge"]


def test_reads_cost_a_fixed_number_of_queries_whatever_the_number_of_runs(
    viewer_client: Client, project: AgentProject
) -> None:
    for day in range(3):
        make_run(project, day=day, rate=100.0 - day * 20)
    with CaptureQueriesContext(connection) as few:
        trends_page(viewer_client, f"?project={project.pk}")
    for day in range(3, 15):
        make_run(project, day=day, rate=100.0 - (day % 5) * 20, model=f"model-{day % 2}")
    with CaptureQueriesContext(connection) as many:
        html = trends_page(viewer_client, f"?project={project.pk}&kinds=standard,geval")

    assert html.count('class="trend-point"') == 15
    assert len(many) == len(few) <= QUERY_BUDGET


def test_only_the_last_points_are_drawn_when_asked(
    viewer_client: Client, project: AgentProject
) -> None:
    runs = [make_run(project, day=day) for day in range(4)]

    html = trends_page(viewer_client, f"?project={project.pk}&last=2")

    assert table_order(html) == [runs[2].pk, runs[3].pk]
    assert "4 finished runs" in html and "the last 2 shown" in html


def make_regrade(original: Run, *, day: int, grading_commit: str, rate: float | None) -> Run:
    """A re-grade of ``original`` as the recorder stores it: at its transcripts' commit, with
    the commit it was graded at (the ref ``strict``) apart."""
    run = make_run(original.project, day=day, commit=original.git_commit, rate=rate)
    sources = {
        "of": original.pk,
        "transcripts": {"run": original.pk, "commit": original.git_commit, "branch": "main"},
        "grading": {"ref": "strict", "commit": grading_commit},
    }
    Run.objects.filter(pk=run.pk).update(
        source=Run.Source.REGRADE, regrade_of=original, regrade_sources=sources
    )
    return run


def regrade_points(html: str) -> list[tuple[int, int]]:
    """(re-grade, the run whose transcripts it grades) of each re-grade drawn."""
    found = re.findall(r'class="trend-regrade" data-run="(\d+)" data-transcripts-run="(\d+)"', html)
    return [(int(run), int(beside)) for run, beside in found]


def test_a_regrade_is_drawn_beside_its_transcripts_run_never_among_the_grading_commit(
    viewer_client: Client, repo_commits: tuple[Path, list[str]]
) -> None:
    directory, (first, _, third) = repo_commits
    project = make_project("git-agent", str(directory))
    original = make_run(project, day=0, commit=first, rate=100.0)
    on_third = make_run(project, day=1, commit=third, rate=100.0)
    regrade = make_regrade(original, day=2, grading_commit=third, rate=50.0)

    html = trends_page(viewer_client, f"?project={project.pk}")

    # Not a point of the series (nor of the third commit): no line through it, no drop.
    assert table_order(html) == [original.pk, on_third.pk]
    assert html.count('class="trend-point"') == 2
    assert '<g class="trend-callout">' not in html
    assert regrade_points(html) == [(regrade.pk, original.pk)]
    assert f"Re-grade #{regrade.pk} of #{original.pk} · passed · pass rate 50%" in html
    assert "1 re-grade kept out of the commit series" in html
    regrades = html.split('<table class="grid trend-regrades">', 1)[1]
    assert f"re-grade of #{original.pk} with strict" in regrades
    assert third[:8] in regrades  # the commit it was graded at, said apart


def test_regrades_can_be_hidden_and_those_of_runs_not_shown_are_left_out(
    viewer_client: Client, project: AgentProject
) -> None:
    older = make_run(project, day=0)
    newer = make_run(project, day=1)
    make_regrade(older, day=2, grading_commit="e" * 40, rate=50.0)
    of_newer = make_regrade(newer, day=3, grading_commit="e" * 40, rate=50.0)

    shown = trends_page(viewer_client, f"?project={project.pk}")
    hidden = trends_page(viewer_client, f"?project={project.pk}&regrades=hide")
    last = trends_page(viewer_client, f"?project={project.pk}&last=1")

    assert table_order(shown) == [older.pk, newer.pk] and len(regrade_points(shown)) == 2
    assert regrade_points(hidden) == [] and "trend-regrades" not in hidden
    assert "2 re-grades kept out of the commit series (hidden)" in hidden
    assert regrade_points(last) == [(of_newer.pk, newer.pk)]
    assert "1 of runs not shown left out" in last


@pytest.mark.parametrize(
    "query",
    [
        "?agent=x&regrades=maybe",
        "?project=abc",
        "?project=0",
        "?project=99999999999999999999999",
        "?agent=a%00b",
        "?agent=x&margin=-1",
        "?agent=x&margin=nan",
        "?agent=x&margin=lots",
        "?agent=x&kinds=standard,bogus",
        "?agent=x&kinds=rag&kinds=nope",
        "?agent=x&kinds=co%00de",
        "?agent=x&last=0",
        "?agent=x&last=100000",
        "?agent=x&branch=nowhere",
    ],
)
def test_bad_parameters_are_a_400(viewer_client: Client, query: str) -> None:
    make_run(None, day=0, agent="x")

    assert viewer_client.get(reverse("trends") + query).status_code == 400


def test_an_unknown_project_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get(reverse("trends") + "?project=12345").status_code == 404


def test_without_a_project_or_agent_the_page_offers_both(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(None, day=0, agent="imported-agent")

    html = trends_page(viewer_client, "")

    assert f'href="/trends/?project={project.pk}"' in html
    assert 'href="/trends/?agent=imported-agent"' in html


def test_the_projects_page_links_each_project_to_its_trends(
    viewer_client: Client, project: AgentProject
) -> None:
    html = viewer_client.get(reverse("home")).text

    assert f'href="/trends/?project={project.pk}"' in html


def test_the_page_needs_a_login(client: Client, project: AgentProject) -> None:
    response = client.get(reverse("trends") + f"?project={project.pk}")

    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_page_writes_nothing_to_the_database(
    viewer_client: Client, repo_commits: tuple[Path, list[str]]
) -> None:
    directory, commits = repo_commits
    project = make_project("git-agent", str(directory))
    for day, commit in enumerate(commits):
        make_run(project, day=day, commit=commit)

    with CaptureQueriesContext(connection) as queries:
        trends_page(viewer_client, f"?project={project.pk}")

    writes = ("INSERT", "UPDATE", "DELETE", "REPLACE")
    assert not [q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(writes)]


# --- the churn and one panel per metric kind -----------------------------------------------------


def churn_of(html: str) -> dict[int, tuple[int, int]]:
    """Run id -> (regressed, fixed) of each churn bar drawn."""
    found = re.findall(
        r'class="trend-churn" data-run="(\d+)" data-regressions="(\d+)" data-fixes="(\d+)"', html
    )
    return {int(run): (int(regressed), int(fixed)) for run, regressed, fixed in found}


def test_each_run_shows_the_turns_it_regressed_and_fixed_against_the_run_before(
    viewer_client: Client, project: AgentProject
) -> None:
    from tests.compare.compare_data import three_runs

    data = three_runs(project)

    html = trends_page(viewer_client, f"?project={project.pk}")

    # The middle run fixed case 1's turn 2 and broke case 2's; the newest broke cases 1 and 3
    # again and fixed case 2: a pass rate that barely moves hides that churn.
    assert churn_of(html) == {data.middle.pk: (1, 1), data.newest.pk: (2, 1)}
    assert "Turns fixed (up) and regressed (down) against the run before" in html
    compare = f"/compare/?runs={data.middle.pk},{data.newest.pk}&amp;baseline={data.middle.pk}"
    row = re.search(rf'<tr data-run="{data.newest.pk}">.*?</tr>', html, re.S)
    assert row is not None and f'href="{compare}"' in row.group(0)
    assert "2 regressed</span> · <span" in row.group(0) and "1 fixed" in row.group(0)
    first = re.search(rf'<tr data-run="{data.oldest.pk}">.*?</tr>', html, re.S)
    assert first is not None and "first run" in first.group(0)


def test_the_first_run_drawn_is_compared_with_the_run_just_before_the_window(
    viewer_client: Client, project: AgentProject
) -> None:
    from tests.compare.compare_data import three_runs

    data = three_runs(project)

    html = trends_page(viewer_client, f"?project={project.pk}&last=2")

    assert churn_of(html) == {data.middle.pk: (1, 1), data.newest.pk: (2, 1)}
    assert f"vs #{data.oldest.pk}" in html


def test_the_churn_counts_only_the_chosen_kinds_verdicts(
    viewer_client: Client, project: AgentProject
) -> None:
    from tests.compare.compare_data import three_runs

    data = three_runs(project)

    judged = trends_page(viewer_client, f"?project={project.pk}&kinds=geval")
    graded = trends_page(viewer_client, f"?project={project.pk}&kinds=code")

    # The failing turns' judge could not grade: under geval alone nothing regressed.
    assert churn_of(judged) == {data.middle.pk: (0, 0), data.newest.pk: (0, 0)}
    assert churn_of(graded) == {data.middle.pk: (1, 1), data.newest.pk: (2, 1)}


def test_each_metric_kind_is_drawn_in_a_small_panel_of_its_own(
    viewer_client: Client, project: AgentProject
) -> None:
    make_run(project, day=0)
    make_run(project, day=1)

    html = trends_page(viewer_client, f"?project={project.pk}")

    titles = re.findall(r'<text class="trend-panel-title"[^>]*>([^<]*)</text>', html)
    assert titles == [
        "Pass rate (%)",
        "Turns fixed (up) and regressed (down) against the run before",
        "standard metrics: average score (0–1)",
        "geval metrics: average score (0–1)",
        "code metrics: average score (0–1)",
    ]
    only_code = trends_page(viewer_client, f"?project={project.pk}&kinds=code")
    assert re.findall(r'trend-panel-title"[^>]*>(\w+) metrics', only_code) == ["code"]

"""The CI gate: ``manage.py gate`` and ``POST /api/v1/gate`` compare a run with its baseline and
fail on regressed turns, a low pass rate or a metric drop, with a Markdown summary."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from runs.models import AgentProject, CaseRow, Run
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db

API = "/api/v1/gate"


class Gate:
    """What one ``manage.py gate`` said."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def gate(*args: Any) -> Gate:
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("gate", *[str(arg) for arg in args], stdout=out, stderr=err)
    return Gate(int(exited.value.code or 0), out.getvalue(), err.getvalue())


def later(minutes: int) -> Any:
    return timezone.now() + timedelta(minutes=minutes)


def same_names(*runs: Run) -> None:
    """The factory names failing cases apart; here a case keeps its name from run to run."""
    for case in CaseRow.objects.filter(run__in=runs, name__startswith="failing "):
        CaseRow.objects.filter(pk=case.pk).update(name=case.name.removeprefix("failing "))


def passing_run(project: AgentProject, minutes: int = 0, branch: str = "main") -> Run:
    run = build_run(
        project,
        RunSpec(cases=4, turns=2, failing=(), status=Run.Status.PASSED),
        created_at=later(minutes),
    )
    return on_branch(run, branch)


def regressed_run(project: AgentProject, minutes: int = 5, branch: str = "main") -> Run:
    """Case 1's turn 1 fails its standard metric (rouge 0.31 instead of 0.82), its code grader
    and its tool assertion; its judge could not grade."""
    run = build_run(project, RunSpec(cases=4, turns=2, failing=(1,)), created_at=later(minutes))
    same_names(run)
    return on_branch(run, branch)


def on_branch(run: Run, branch: str) -> Run:
    Run.objects.filter(pk=run.pk).update(git_branch=branch)
    run.refresh_from_db()
    return run


# --- the verdict --------------------------------------------------------------------------------


def test_a_regressed_run_exits_1_and_names_the_regressed_cases_and_turns(
    project: AgentProject,
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    said = gate("--run", run.pk, "--baseline", base.pk, "--url", "https://holodeck.example")
    assert said.code == 1, said.err
    assert said.out.startswith("## ❌ HoloDeck gate failed")
    assert "1 regressed turn (at most 0 allowed)" in said.out
    # Turns numbered from 1 for people ("2": the second turn), and so is the link's anchor.
    assert "| refund case 1 | 1 | turn 2 |" in said.out
    link = f"https://holodeck.example/compare/case/?runs={base.pk}%2C{run.pk}&key=refund+case+1"
    assert f"[compare]({link}#turn-2)" in said.out
    assert "| pass rate | 75% | 100% | -25 pts |" in said.out
    assert "| cases passed | 3 | 4 | -1 |" in said.out
    assert "| cases failed | 1 | 0 | +1 |" in said.out
    assert "| cases not graded | 0 | 0 | +0 |" in said.out
    assert "| turns failed | 1 | 0 | +1 |" in said.out


def test_an_equal_run_exits_0_with_a_passing_summary(project: AgentProject) -> None:
    base = passing_run(project)
    run = passing_run(project, minutes=5)
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert said.code == 0, said.err
    assert said.out.startswith("## ✅ HoloDeck gate passed")
    assert "Regressed cases" not in said.out and "Failed because" not in said.out
    # Unchanged metrics: no change reads +0.000, never a negative zero.
    assert "-0.000" not in said.out and "| 0.82 | 0.82 | +0.000 |" in said.out


def test_the_links_start_with_the_public_url_setting(project: AgentProject, settings: Any) -> None:
    settings.HOLODECK_PUBLIC_URL = "https://holodeck.example.com"
    base = passing_run(project)
    run = passing_run(project, minutes=5)
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert said.code == 0, said.err
    assert f"[#{run.pk}](https://holodeck.example.com/runs/{run.pk}/)" in said.out
    assert "127.0.0.1" not in said.out and said.err == ""


def test_without_a_public_url_the_links_are_paths_and_the_command_says_so(
    project: AgentProject, settings: Any
) -> None:
    settings.HOLODECK_PUBLIC_URL = ""
    base = passing_run(project)
    run = passing_run(project, minutes=5)
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert said.code == 0, said.err
    assert f"[#{run.pk}](/runs/{run.pk}/)" in said.out
    assert "127.0.0.1" not in said.out
    assert "HOLODECK_PUBLIC_URL is not set" in said.err


def test_fixes_are_counted_and_never_fail_the_gate(project: AgentProject) -> None:
    base = regressed_run(project, minutes=0)
    run = passing_run(project, minutes=5)
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert said.code == 0
    assert "| fixed turns | 1 | | |" in said.out


def test_max_regressions_allows_that_many_regressed_turns(project: AgentProject) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    assert gate("--run", run.pk, "--baseline", base.pk, "--max-regressions", 1).code == 0


def test_a_pass_rate_below_min_pass_rate_fails_even_without_regressions(
    project: AgentProject,
) -> None:
    base = regressed_run(project, minutes=0)
    run = regressed_run(project, minutes=5)
    assert gate("--run", run.pk, "--baseline", base.pk, "--min-pass-rate", 75).code == 0
    said = gate("--run", run.pk, "--baseline", base.pk, "--min-pass-rate", 80)
    assert said.code == 1
    assert "pass rate 75% is below 80%" in said.out


def test_min_pass_rate_fails_a_run_with_no_pass_rate_saying_why(project: AgentProject) -> None:
    base = passing_run(project)
    run = passing_run(project, minutes=5)
    CaseRow.objects.filter(run=run).update(outcome="not_graded")
    said = gate("--run", run.pk, "--baseline", base.pk, "--min-pass-rate", 50)
    assert said.code == 1
    assert "| pass rate | – | 100% |  |" in said.out  # no pass rate, never 0 %
    assert "| cases not graded | 4 | 0 | +4 |" in said.out
    assert f"run #{run.pk} has no pass rate (no case was graded" in said.out
    assert "cannot reach the minimum pass rate 50%" in said.out


def test_kinds_counts_regressions_of_those_kinds_only(project: AgentProject) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    # The judge could not grade: not graded is never a regression.
    said = gate("--run", run.pk, "--baseline", base.pk, "--kinds", "geval")
    assert said.code == 0, said.out
    assert "counted for geval only" in said.out
    said = gate("--run", run.pk, "--baseline", base.pk, "--kinds", "geval,code")
    assert said.code == 1
    assert "kinds=geval%2Ccode" in said.out


def test_max_metric_drop_fails_when_that_metrics_average_dropped_more(
    project: AgentProject,
) -> None:
    base = passing_run(project)
    run = regressed_run(project)  # rouge: 0.82 on every turn, then one turn at 0.31
    args = ("--run", run.pk, "--baseline", base.pk, "--max-regressions", 1)
    assert gate(*args, "--max-metric-drop", "rouge=0.1").code == 0
    said = gate(*args, "--max-metric-drop", "rouge=0.05")
    assert said.code == 1
    assert "rouge dropped by 0.064 (0.82 → 0.76; at most 0.05 allowed)" in said.out
    # The run's per-turn counts of the metric, its average, the baseline's, the change.
    assert "| rouge ❌ | standard | 8 | 7 | 1 | 0 | 0.76 | 0.82 | -0.064 | 0.05 |" in said.out


def test_metric_drops_outside_the_selected_kinds_are_not_counted(project: AgentProject) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    said = gate(
        "--run", run.pk, "--baseline", base.pk, "--kinds", "geval",
        "--max-metric-drop", "rouge=0.05",
    )  # fmt: skip
    assert said.code == 2
    assert "neither run has a metric 'rouge'" in said.err


def test_a_run_that_ended_in_error_fails_the_gate(project: AgentProject) -> None:
    base = passing_run(project)
    run = passing_run(project, minutes=5)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.ERROR)
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert said.code == 1
    assert f"- run #{run.pk} ended error" in said.out


def test_a_run_still_running_is_not_gated(project: AgentProject) -> None:
    passing_run(project)
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=2), created_at=later(5))
    said = gate("--run", run.pk)
    assert said.code == 2
    assert f"run #{run.pk} is still running: gate it once it has finished" in said.err


# --- the baseline -------------------------------------------------------------------------------


def test_by_default_the_baseline_is_found_by_the_compare_rule(project: AgentProject) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    said = gate("--run", run.pk)
    assert said.code == 1
    assert f"against baseline [#{base.pk}]" in said.out
    assert "the latest earlier finished run of main" in said.out


def test_a_run_without_a_baseline_exits_2_saying_which_rule_found_nothing(
    project: AgentProject,
) -> None:
    run = regressed_run(project)
    said = gate("--run", run.pk)
    assert said.code == 2 and said.out == ""
    assert f"no baseline for run #{run.pk}: the parent-commit rule found no" in said.err
    assert "weather-agent" in said.err


def test_latest_branch_takes_the_latest_finished_run_of_that_branch(
    project: AgentProject,
) -> None:
    main = passing_run(project, minutes=0, branch="main")
    regressed_run(project, minutes=2, branch="release")
    build_run(project, RunSpec(status=Run.Status.RUNNING, done=2), created_at=later(3))
    run = regressed_run(project, minutes=5, branch="feature")
    said = gate("--run", run.pk, "--baseline", "latest:main")
    assert said.code == 1
    assert f"against baseline [#{main.pk}]" in said.out
    assert "the latest finished run of main" in said.out


def test_latest_of_a_branch_without_runs_exits_2(project: AgentProject) -> None:
    run = regressed_run(project, branch="feature")
    make_project("other", "/srv/agents/other").runs.create(
        agent_name="other", status=Run.Status.PASSED, git_branch="main"
    )
    said = gate("--run", run.pk, "--baseline", "latest:main")
    assert said.code == 2
    assert "latest:main found no finished run of branch main in project weather-agent" in said.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--run", 999_999), "no run #999999"),
        (("--run", 2**64), f"no run #{2**64}"),
        (("--baseline", str(2**64)), f"no baseline run #{2**64}"),
        (("--baseline", "999999"), "no baseline run #999999"),
        (("--baseline", "latest:"), "baseline 'latest:': use a run id"),
        (("--baseline", "yesterday"), "baseline 'yesterday': use a run id"),
        (("--min-pass-rate", "120"), "--min-pass-rate 120: must be between 0 and 100"),
        (("--max-regressions", "-1"), "--max-regressions -1: must be 0 or more"),
        (("--kinds", "standard,vibes"), "unknown kind 'vibes'"),
        (("--max-metric-drop", "rouge"), "--max-metric-drop 'rouge': use NAME=DROP"),
        (("--max-metric-drop", "rouge=-1"), "--max-metric-drop 'rouge=-1': use NAME=DROP"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    project: AgentProject, args: tuple[Any, ...], message: str
) -> None:
    run = regressed_run(project)
    passing_run(project)
    said = gate("--run", run.pk, *args)
    assert said.code == 2
    assert message in said.err


def test_the_summary_is_also_written_to_the_markdown_file(
    project: AgentProject, tmp_path: Path
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    target = tmp_path / "out" / "gate.md"
    said = gate("--run", run.pk, "--baseline", base.pk, "--markdown", target)
    assert target.read_text(encoding="utf-8") == said.out


def test_case_names_are_escaped_in_the_summary(project: AgentProject) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    CaseRow.objects.filter(name="refund case 1").update(name="a | b <script>")
    said = gate("--run", run.pk, "--baseline", base.pk)
    assert "| a \\| b \\<script\\> | 1 | turn 2 |" in said.out


# --- running the agent first --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_agent_runs_the_agent_yaml_stores_it_and_gates_it(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    base = Run.objects.get()
    said = gate("--agent", project.agent_path, "--baseline", base.pk)
    assert said.code == 0, said.err
    run = Run.objects.exclude(pk=base.pk).get()
    assert run.source == Run.Source.CLI and run.project == project
    assert said.out.startswith("## ✅ HoloDeck gate passed: convfinqa-analyst")
    assert f"Run [#{run.pk}]" in said.out and f"stored as run {run.pk}" in said.err
    assert "| cases passed | 2 | 2 | +0 |" in said.out


@pytest.mark.django_db(transaction=True)
def test_agent_with_a_broken_agent_yaml_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "agent.yaml"
    broken.write_text("name: broken\n")
    said = gate("--agent", broken)
    assert said.code == 2 and said.out == ""
    assert not Run.objects.exists()


# --- the API ------------------------------------------------------------------------------------


def bearer(user: User) -> dict[str, str]:
    _, secret = token_create(user=user, name="ci")
    return {"Authorization": f"Bearer {secret}"}


def post(client: Client, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return client.post(API, body, content_type="application/json", headers=headers or {})


def test_the_api_gate_answers_the_verdict_and_the_summary(
    client: Client, viewer: User, project: AgentProject
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    body = {"run": run.pk, "baseline": base.pk, "max_metric_drop": {"rouge": 0.05}}
    response = post(client, body, bearer(viewer))
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["passed"] is False
    assert data["reasons"][0] == "1 regressed turn (at most 0 allowed)"
    assert "rouge dropped by 0.064" in data["reasons"][1]
    assert (data["regressions"], data["fixes"]) == (1, 0)
    assert (data["pass_rate"], data["baseline_pass_rate"]) == (75.0, 100.0)
    assert data["summary"]["cases"]["failed"] == 1 and data["summary"]["pass_rate"] == 75.0
    assert data["baseline_summary"]["cases"]["passed"] == 4
    rouge = next(metric for metric in data["metrics"] if metric["name"] == "rouge")
    assert (rouge["turns"]["evaluated"], rouge["turns"]["failed"]) == (8, 1)
    assert data["baseline_run"] == base.pk
    assert data["regressed"][0]["key"] == "refund case 1" and data["regressed"][0]["turns"] == [1]
    assert data["regressed"][0]["url"].startswith("http://testserver/compare/case/?")
    assert data["markdown"].startswith("## ❌ HoloDeck gate failed")


def test_the_api_gate_takes_the_baseline_rules_and_thresholds(
    client: Client, viewer: User, project: AgentProject
) -> None:
    passing_run(project)
    run = regressed_run(project, branch="feature")
    body = {"run": run.pk, "baseline": "latest:main", "kinds": ["geval"], "min_pass_rate": 70}
    data = post(client, body, bearer(viewer)).json()
    assert data["passed"] is True and data["reasons"] == []


def test_the_api_gate_needs_a_token(client: Client, project: AgentProject) -> None:
    run = regressed_run(project)
    response = post(client, {"run": run.pk})
    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_the_api_gate_says_404_for_an_unknown_run_and_422_without_a_baseline(
    client: Client, viewer: User, project: AgentProject
) -> None:
    headers = bearer(viewer)
    response = post(client, {"run": 999_999}, headers)
    assert response.status_code == 404
    assert response.json() == {"detail": "no run #999999"}
    run = regressed_run(project)
    response = post(client, {"run": run.pk}, headers)
    assert response.status_code == 422
    assert "the parent-commit rule found no" in response.json()["detail"]
    response = post(client, {"run": run.pk, "min_pass_rate": 101}, headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "payload", "min_pass_rate"]


def test_the_api_gate_with_significant_only_answers_which_turns_are_noise(
    client: Client, viewer: User, project: AgentProject
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    Run.objects.filter(pk=run.pk).update(git_commit="b" * 40)  # a side of its own
    body = {"run": run.pk, "baseline": base.pk, "significant_only": True}
    data = post(client, body, bearer(viewer)).json()
    # One run a side is never significant: the regressed turn is a change within noise.
    assert data["passed"] is True
    found = data["significance"]
    assert (found["worse"], found["noise"], found["regressed"]) == (0, 1, [])
    noisy = found["noise_turns"][0]
    assert (noisy["key"], noisy["turn"], noisy["passed_before"], noisy["passed_after"]) == (
        "refund case 1",
        1,
        1,
        0,
    )
    assert "### Changes within noise (1 turn;" in data["markdown"]
    assert "| refund case 1 | turn 2 | 1 of 1 | 0 of 1 | -100 pts |" in data["markdown"]

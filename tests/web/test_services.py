from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runs import recorder
from runs.core import gitutil
from runs.core.agentconfig.errors import ConfigError
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.services import execution, launch, recovery
from tests.web.services_helpers import example_project, git

pytestmark = pytest.mark.django_db(transaction=True)


def launch_run(project: Any, **kwargs: Any) -> Run:
    return launch.run_create(project=project, user=None, **kwargs)


def test_a_launched_run_executes_every_case_turn_by_turn(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch_run(project)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED  # the example has a deliberately failing case
    assert (run.total_cases, run.cases_done) == (3, 3)
    assert (run.passed_cases, run.failed_cases) == (2, 1)
    assert run.total_turns == run.turns_done == TurnRow.objects.filter(run=run).count() == 10
    assert MetricRow.objects.filter(run=run).exists()
    assert run.pass_rate == pytest.approx(66.67)
    assert {row["kind"] for row in run.summary["metrics"]} >= {"standard", "code"}
    failing = CaseRow.objects.get(run=run, passed=False)
    assert failing.turns_passed < failing.turn_count
    assert any(t.tools_matched is False for t in failing.turns.all())


def test_an_invalid_agent_yaml_queues_nothing(tmp_path: Path, eager_celery: None) -> None:
    project = example_project(tmp_path)
    project.agent_path.write_text(project.agent_path.read_text() + "\nbogus_field: 1\n")
    with pytest.raises(ConfigError) as caught:
        launch_run(project)
    assert any("bogus_field" in line for line in caught.value.lines())
    assert not Run.objects.exists()


def test_a_case_filter_and_a_limit_select_the_cases(tmp_path: Path, eager_celery: None) -> None:
    project = example_project(tmp_path)
    run = launch_run(project, case_filter="capex")
    assert list(run.cases.values_list("name", flat=True)) == ["northwind_capex_decline"]
    run = launch_run(project, limit=2)
    assert run.cases.count() == 2
    with pytest.raises(launch.LaunchError):
        launch_run(project, case_filter="no such case")


def test_a_redelivered_case_task_writes_no_duplicate_rows(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch_run(project, limit=1)
    case = run.cases.get()
    turns_before = TurnRow.objects.filter(case=case).count()
    execution.case_execute(case_id=case.pk)  # redelivered after it finished: nothing happens
    assert TurnRow.objects.filter(case=case).count() == turns_before
    # A worker died mid-case: the broker redelivers; partial rows are replaced, not duplicated.
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.RUNNING, claimed_by=dead_process()
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, cases_done=0, passed_cases=0, failed_cases=0
    )
    execution.case_execute(case_id=case.pk)
    run.refresh_from_db()
    assert TurnRow.objects.filter(case=case).count() == turns_before
    assert run.turns_done == turns_before and run.cases_done == 1


def dead_process() -> str:
    """``host:pid`` of a process of this machine that has exited."""
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}"


def test_a_redelivery_leaves_a_case_alone_while_its_worker_is_alive(
    tmp_path: Path, eager_celery: None
) -> None:
    import socket
    import subprocess
    import sys

    run = launch_run(example_project(tmp_path), limit=1)
    case = run.cases.get()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        CaseRow.objects.filter(pk=case.pk).update(
            status=CaseRow.Status.RUNNING,
            heartbeat_at=timezone.now(),
            claimed_by=f"{socket.gethostname()}:{worker.pid}",
        )
        Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
        execution.case_execute(case_id=case.pk)  # e.g. redelivered after the visibility timeout
        case.refresh_from_db()
        assert case.status == CaseRow.Status.RUNNING and case.attempts == 1
    finally:
        worker.kill()
        worker.wait()


def test_cancelling_stops_the_cases_not_yet_started(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    run = launch_run(project)  # not eager: nothing runs
    execution.run_start(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert launch.run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert set(run.cases.values_list("status", flat=True)) == {CaseRow.Status.CANCELLED}
    assert not launch.run_cancel(run=run)  # once only


def test_a_case_whose_worker_went_silent_runs_again(
    tmp_path: Path, settings: Any, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch_run(project, limit=1)  # eager: it ran
    case = run.cases.get()
    # Make it look like a worker on another machine took it and went silent mid-case.
    long_ago = stale(settings)
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.RUNNING,
        started_at=long_ago,
        heartbeat_at=long_ago,
        enqueued_at=long_ago,
        claimed_by="elsewhere:1:1",
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, cases_done=0)
    assert recovery.run_recover(run=Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    case.refresh_from_db()
    assert run.status in (Run.Status.PASSED, Run.Status.FAILED)
    assert case.status == CaseRow.Status.DONE and case.attempts == 2
    assert TurnRow.objects.filter(case=case).count() == case.turn_count
    assert run.turns_done == case.turn_count and run.cases_done == 1


def test_a_case_with_a_live_worker_is_not_queued_again(tmp_path: Path, settings: Any) -> None:
    from unittest import mock

    run = launch_run(example_project(tmp_path), limit=1)
    execution.run_start(run_id=run.pk)
    case = run.cases.get()
    assert recorder.case_claim(case) == 1  # this process, alive, heartbeat fresh
    with mock.patch("runs.services.recovery.task_enqueue") as enqueue:
        recovery.run_recover(run=Run.objects.get(pk=run.pk))
    enqueue.assert_not_called()


def test_runs_can_be_claimed_only_once(tmp_path: Path) -> None:
    run = launch_run(example_project(tmp_path), limit=1)
    assert run.mark_running()
    assert not Run.objects.get(pk=run.pk).mark_running()


def test_the_cli_stores_its_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import call_command

    project = example_project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        call_command("run_agent", str(project.agent_path), "--quiet")
    assert exited.value.code == 1
    run = Run.objects.get()
    assert run.source == Run.Source.CLI and run.project == project
    assert run.turns_done == 10 and run.cases.count() == 3
    assert not (project.agent_path.parent / "results").exists()  # outside the project


def test_the_staff_user_is_created_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    from django.core.management import call_command

    monkeypatch.setenv("HOLODECK_ADMIN_PASSWORD", "a-long-password")
    call_command("ensure_admin")
    call_command("ensure_admin")
    assert User.objects.get().is_staff


def test_a_run_of_an_older_commit_uses_that_commits_agent_yaml(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    repo = Path(project.directory)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "three cases")
    old = git(repo, "rev-parse", "HEAD")
    text = project.agent_path.read_text()
    project.agent_path.write_text(text.replace("name: convfinqa-analyst", "name: renamed", 1))
    git(repo, "commit", "-qam", "rename the agent")

    current = launch_run(project, limit=1)
    assert current.agent_name == "renamed"
    assert current.git_commit == git(repo, "rev-parse", "HEAD") and not current.git_dirty
    past = launch_run(project, git_ref=old[:10], limit=1)
    past.refresh_from_db()
    assert past.agent_name == "convfinqa-analyst" and past.git_commit == old
    assert past.status in (Run.Status.PASSED, Run.Status.FAILED) and past.turns_done == 3
    assert git(repo, "worktree", "list").count("\n") == 0  # temporary worktrees are removed
    with pytest.raises(launch.LaunchError, match="not a commit"):
        launch_run(project, git_ref="no-such-branch")


def test_a_run_launched_at_a_commit_names_the_branch_that_holds_it(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    repo = Path(project.directory)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    git(repo, "checkout", "-qb", "feature")
    git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    feature_only = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    git(repo, "commit", "-q", "--allow-empty", "-m", "on no branch")
    loose = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")

    def branch(ref: str) -> str:
        return launch_run(project, git_ref=ref, limit=1).git_branch

    assert branch(first) == "main"  # a sha on main (and on feature, which the checkout is not)
    assert branch("main~1") == "main"
    assert branch(feature_only) == "feature"
    assert branch("feature") == "feature"
    assert branch(loose[:10]) == ""
    assert launch_run(project, limit=1).git_branch == "main"  # the working tree's, as before


def test_the_branch_of_a_commit_on_several_is_the_ref_then_the_checkouts_then_main(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    commit = git(repo, "rev-parse", "HEAD")
    for name in ("aaa", "main", "zzz"):
        git(repo, "branch", name)
    assert gitutil.branch_of(repo, commit, ref="zzz", current="aaa") == "zzz"
    assert gitutil.branch_of(repo, commit, ref=commit, current="aaa") == "aaa"
    assert gitutil.branch_of(repo, commit, ref=commit, current="gone") == "main"
    git(repo, "branch", "-D", "main")
    assert gitutil.branch_of(repo, commit) == "aaa"  # the first, in git's order
    assert gitutil.branch_of(repo, "f" * 40) == "" and gitutil.branch_of(tmp_path, commit) == ""


def stale(settings: Any) -> Any:
    return timezone.now() - timezone.timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS + 5)


def test_a_case_redelivered_after_it_finished_still_queues_the_next_case(
    tmp_path: Path, settings: Any
) -> None:
    run = launch_run(example_project(tmp_path), parallel=1)
    execution.run_start(run_id=run.pk)
    first, second, third = run.cases.order_by("index")
    assert [c.enqueued for c in (first, second, third)] == [True, False, False]
    # The worker recorded the case, then died before queueing the next one.
    CaseRow.objects.filter(pk=first.pk).update(status=CaseRow.Status.DONE, passed=True)
    execution.case_execute(case_id=first.pk)  # the redelivery
    assert CaseRow.objects.get(pk=second.pk).enqueued
    assert not CaseRow.objects.get(pk=third.pk).enqueued  # still bounded by parallel=1


def test_a_case_cancelled_before_its_worker_claims_it_never_runs(tmp_path: Path) -> None:
    run = launch_run(example_project(tmp_path), limit=1)
    execution.run_start(run_id=run.pk)
    case = run.cases.get()
    launch.run_cancel(run=Run.objects.get(pk=run.pk))
    execution.case_execute(case_id=case.pk)
    case.refresh_from_db()
    run.refresh_from_db()
    assert case.status == CaseRow.Status.CANCELLED and case.attempts == 0
    assert not TurnRow.objects.filter(run=run).exists()
    assert (run.status, run.cases_done, run.total_cases) == (Run.Status.CANCELLED, 1, 1)


def test_an_attempt_that_lost_the_case_writes_nothing_more(tmp_path: Path) -> None:
    run = launch_run(example_project(tmp_path), limit=1)
    execution.run_start(run_id=run.pk)
    case = run.cases.get()
    attempt = recorder.case_claim(case)
    assert attempt == 1
    CaseRow.objects.filter(pk=case.pk).update(attempts=2)  # a redelivery took it over
    from runs.core.wire.models import TurnResult as WireTurn

    turn = WireTurn(turn_index=0, input="q", passed=True, execution_time_ms=1)
    with pytest.raises(recorder.CaseSuperseded):
        recorder.turns_append(case, attempt, [turn])
    assert not TurnRow.objects.filter(case=case).exists()


def test_a_case_that_keeps_killing_its_worker_is_given_up(tmp_path: Path) -> None:
    run = launch_run(example_project(tmp_path), limit=1)
    execution.run_start(run_id=run.pk)
    case = run.cases.get()
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.RUNNING, attempts=recorder.MAX_CASE_ATTEMPTS
    )
    execution.case_execute(case_id=case.pk)
    case.refresh_from_db()
    assert case.status == CaseRow.Status.ERROR and "gave up after 3 attempts" in case.errors[0]
    assert Run.objects.get(pk=run.pk).status == Run.Status.ERROR


def test_an_agent_yaml_edited_mid_run_does_not_leak_into_the_run(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    run = launch_run(project, parallel=1)  # not eager: validated and queued, nothing ran yet
    execution.run_start(run_id=run.pk)
    first, *rest = run.cases.order_by("index")
    execution.case_execute(case_id=first.pk)
    # Mid-run: rename a case, break the YAML's metrics; the run goes on as launched.
    text = project.agent_path.read_text()
    edited = text.replace("northwind_capex_decline", "renamed_case", 1)
    project.agent_path.write_text(edited + "\nbogus_field: 1\n")
    for case in rest:
        execution.case_execute(case_id=case.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED  # as launched: one deliberately failing case
    assert (run.passed_cases, run.failed_cases, run.turns_done) == (2, 1, 10)
    assert not CaseRow.objects.filter(run=run, status=CaseRow.Status.ERROR).exists()


def test_a_tool_file_edited_after_launch_changes_nothing_in_the_run(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    run = launch_run(project, limit=1)
    tool = Path(project.directory) / "tools" / "finance.py"
    tool.write_text("raise RuntimeError('edited after the launch')\n")  # breaks every import
    execution.run_start(run_id=run.pk)
    execution.case_execute(case_id=run.cases.get().pk)
    case = run.cases.get()
    assert case.status == CaseRow.Status.DONE and case.outcome == "passed", case.errors


def test_a_lost_case_message_is_sent_again(tmp_path: Path, settings: Any) -> None:
    from unittest import mock

    run = launch_run(example_project(tmp_path), limit=1)
    execution.run_start(run_id=run.pk)
    case = run.cases.get()
    CaseRow.objects.filter(pk=case.pk).update(enqueued_at=stale(settings))
    with mock.patch("runs.tasks.execute_case.delay") as delay:
        assert recovery.run_recover(run=Run.objects.get(pk=run.pk))
    delay.assert_called_once_with(case.pk)


def test_a_run_whose_start_message_was_lost_is_started_again(tmp_path: Path, settings: Any) -> None:
    from unittest import mock

    run = launch_run(example_project(tmp_path), limit=1)
    Run.objects.filter(pk=run.pk).update(created_at=stale(settings))
    with mock.patch("runs.tasks.start_run.delay") as delay:
        recovery.runs_recover()
    delay.assert_called_once_with(run.pk)


def test_cancelling_a_run_with_nothing_running_stores_its_roll_up(tmp_path: Path) -> None:
    run = launch_run(example_project(tmp_path))
    execution.run_start(run_id=run.pk)
    launch.run_cancel(run=Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.duration_ms is not None and run.report_timestamp
    assert (run.cases_done, run.passed_cases, run.failed_cases) == (3, 0, 0)


def test_a_cancelled_run_waits_for_its_running_case_then_the_sweeper_stops_a_dead_one(
    tmp_path: Path, settings: Any
) -> None:
    run = launch_run(example_project(tmp_path))
    execution.run_start(run_id=run.pk)
    case = Run.objects.get(pk=run.pk).cases.order_by("index").first()
    assert case is not None and recorder.case_claim(case) == 1  # this process runs it
    assert launch.run_cancel(run=Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    # Cancelled, but its running case stops only after its current turn: the run is stopping.
    assert run.status == Run.Status.CANCELLED and run.is_stopping and run.is_live
    assert run.cases_stopping == 1 and not run.summary
    recovery.runs_recover()  # its worker is alive: it is left to stop by itself
    assert CaseRow.objects.get(pk=case.pk).status == CaseRow.Status.RUNNING

    # Its worker dies: the sweeper cancels the case, with what it wrote, and ends the run.
    long_ago = stale(settings)
    CaseRow.objects.filter(pk=case.pk).update(heartbeat_at=long_ago, claimed_by="gone:1:1")
    assert recovery.runs_recover() == 1
    run.refresh_from_db()
    case.refresh_from_db()
    assert case.status == CaseRow.Status.CANCELLED and case.outcome == "cancelled"
    assert not run.is_stopping and not run.is_live and run.cases_done == run.total_cases
    assert run.summary and run.report_timestamp
    assert recovery.runs_recover() == 0  # nothing left to do


def test_a_regrade_of_a_cancelled_run_grades_the_cases_that_ran_and_carries_the_others(
    tmp_path: Path,
) -> None:
    from runs.services.regrade import run_regrade_create

    project = example_project(tmp_path)
    run = launch_run(project, limit=2)
    execution.run_execute_inline(run_id=run.pk)
    # As if cancelled after its first case: the second never started.
    second = run.cases.get(index=1)
    TurnRow.objects.filter(case=second).delete()
    CaseRow.objects.filter(pk=second.pk).update(
        status=CaseRow.Status.CANCELLED, outcome="cancelled", started_at=None
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    regrade = execution.run_execute_inline(
        run_id=run_regrade_create(original=Run.objects.get(pk=run.pk), enqueue=False).pk
    )
    # The case that ran is graded; the one that never started is carried over, cancelled, not
    # sent to a worker: the re-grade reads as its original (status, counts, partial badge).
    assert list(regrade.cases.order_by("index").values_list("index", "outcome", "started_at")) == [
        (0, run.cases.get(index=0).outcome, regrade.cases.get(index=0).started_at),
        (1, "cancelled", None),
    ]
    assert regrade.status == Run.Status.CANCELLED and not regrade.is_live
    assert (regrade.cases_done, regrade.total_cases) == (2, 2)
    assert regrade.summary["cases"]["cancelled"] == 1
    assert regrade.partial_text == run.partial_text == "partial: 2 of 3 cases, limit 2"

    # Cancelled before any case ran: nothing to re-grade, said so.
    TurnRow.objects.filter(run=run).delete()
    with pytest.raises(launch.LaunchError, match="no case that ran"):
        run_regrade_create(original=Run.objects.get(pk=run.pk), enqueue=False)


def test_a_regrade_case_whose_original_never_ran_is_not_graded_not_an_error(
    tmp_path: Path,
) -> None:
    from runs.services.regrade import run_regrade_create

    project = example_project(tmp_path)
    run = launch_run(project, limit=2)
    run = execution.run_execute_inline(run_id=run.pk)
    created = run_regrade_create(original=run, enqueue=False)
    # The original's turns of case 1 vanish before the re-grade grades it.
    TurnRow.objects.filter(run=run, case__index=1).delete()
    regrade = execution.run_execute_inline(run_id=created.pk)
    case = regrade.cases.get(index=1)
    assert case.outcome == "not_graded" and case.status == CaseRow.Status.DONE
    assert case.errors == [f"not re-gradable: run {run.pk} never ran it"]
    assert regrade.status != Run.Status.ERROR

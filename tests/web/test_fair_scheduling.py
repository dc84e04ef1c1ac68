"""Fair scheduling across runs (runs/services/execution.py): a worker slot that finishes a case
takes the next case of the run with the fewest cases running, so a re-grade or a small run
launched while a big run keeps every slot busy does not queue behind the big run's cases, and
no run ever has more than its ``parallel`` cases in flight."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runs.models import CaseRow, Run
from runs.services import execution, launch
from runs.services.execution import RunLoad, run_fairest
from runs.services.regrade import run_regrade_create
from tests.web.services_helpers import example_project
from tests.web.snapshot_helpers import run_here

OPEN = [CaseRow.Status.PENDING, CaseRow.Status.RUNNING]
EARLY = datetime(2026, 12, 1, tzinfo=UTC)


def load(run_id: int, status: str = Run.Status.RUNNING, minutes: int = 0, **counts: int) -> RunLoad:
    return RunLoad(run_id, status, EARLY + timedelta(minutes=minutes), **counts)


def fairest(*loads: RunLoad, after: int, freed: dict[int, int] | None = None) -> int | None:
    found = run_fairest({each.run_id: each for each in loads}, after=after, freed=freed or {})
    return found.run_id if found else None


# --- the decision ---------------------------------------------------------------------------


def test_a_slot_takes_the_run_with_the_fewest_cases_running() -> None:
    big = load(1, running=1, unqueued=120)
    small = load(2, minutes=5, waiting=4)
    assert fairest(big, small, after=1, freed={1: 1}) == 2


def test_a_queued_run_is_served_before_a_big_run_with_cases_running() -> None:
    big = load(1, running=1, unqueued=120)
    queued = load(2, Run.Status.QUEUED, minutes=5, unqueued=4)
    assert fairest(big, queued, after=1, freed={1: 1}) == 2


def test_on_a_tie_another_run_goes_first_round_robin() -> None:
    big = load(1, unqueued=120)
    small = load(2, minutes=5, waiting=3)
    assert fairest(big, small, after=1, freed={1: 1}) == 2
    assert fairest(big, small, after=2, freed={1: 1, 2: 1}) == 1


def test_a_run_with_more_cases_running_waits_for_its_turn() -> None:
    big = load(1, running=1, unqueued=120)
    small = load(2, minutes=5, running=2, waiting=2)
    assert fairest(big, small, after=1, freed={1: 1}) == 1


def test_a_run_never_gets_a_case_over_its_parallel_without_a_slot_freed_for_it() -> None:
    # Run 1's cases not queued yet are over its parallel: only a slot one of its own cases
    # freed may start one.
    big = load(1, unqueued=120)
    other = load(2, running=3)
    assert fairest(big, other, after=2) is None
    assert fairest(big, other, after=2, freed={1: 1}) == 1


def test_with_nothing_to_start_the_slot_is_left_to_the_broker() -> None:
    assert fairest(load(1, running=2), after=1, freed={1: 1}) is None


# --- a worker slot, end to end -------------------------------------------------------------


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int, int, set[int]]]]:
    """The cases this process runs, in order, as (run id, index, repetition, the ids of the
    runs ended by then); each is checked against every run's ``parallel`` when it starts."""
    started: list[tuple[int, int, int, set[int]]] = []
    real_run = execution._case_run

    def counting_run(case: CaseRow, attempt: int, agent: Any = None) -> Any:
        ended = set(Run.objects.exclude(status__in=Run.ACTIVE).values_list("pk", flat=True))
        started.append((case.run_id, case.index, case.repetition, ended))
        for run in Run.objects.filter(status=Run.Status.RUNNING):
            in_flight = run.cases.filter(enqueued=True, status__in=OPEN).count()
            assert in_flight <= int(run.options["parallel"]), (run.pk, in_flight)
        return real_run(case, attempt, agent)

    monkeypatch.setattr(execution, "_case_run", counting_run)
    monkeypatch.setattr(execution, "CHAIN_SECONDS", 600)  # the decision, not the budget
    execution.run_agents_forget()
    yield started
    execution.run_agents_forget()


@pytest.mark.django_db(transaction=True)
def test_a_regrade_launched_behind_a_big_run_runs_before_the_rest_of_the_big_run(
    tmp_path: Path, ran: list[tuple[int, int, int, set[int]]]
) -> None:
    project = example_project(tmp_path)
    original = launch.run_create(project=project)
    run_here(original)
    original.refresh_from_db()
    big = launch.run_create(project=project, parallel=1, repeats=4)  # 12 cases, one at a time
    execution.run_start(run_id=big.pk)
    regrade = run_regrade_create(original=original)  # queued behind the big run
    ran.clear()
    first = big.cases.get(enqueued=True)

    # The one worker slot runs the big run's first case, then takes the next case itself.
    execution.case_execute(case_id=first.pk)

    runs = [run_id for run_id, _, _, _ in ran]
    assert runs[:6] == [big.pk, regrade.pk] * 3  # round robin: the re-grade does not wait
    # The re-grade ended with its last case, not when the task did.
    assert regrade.pk in ran[6][3]
    regrade.refresh_from_db()
    assert regrade.status in (Run.Status.PASSED, Run.Status.FAILED)
    assert regrade.cases_done == regrade.total_cases == 3
    big.refresh_from_db()
    assert big.cases_done == big.total_cases == 12 and not big.is_active

    # The re-grade's own messages, delivered now, find their cases done: nothing runs again.
    count = len(ran)
    for case in regrade.cases.all():
        execution.case_execute(case_id=case.pk)
    assert len(ran) == count


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_runs_cases_are_never_taken_by_a_slot(
    tmp_path: Path, ran: list[tuple[int, int, int, set[int]]]
) -> None:
    project = example_project(tmp_path)
    big = launch.run_create(project=project, parallel=1, repeats=2)
    execution.run_start(run_id=big.pk)
    small = launch.run_create(project=project)
    execution.run_start(run_id=small.pk)  # its cases queued to the broker, none started
    launch.run_cancel(run=small)

    execution.case_execute(case_id=big.cases.get(enqueued=True).pk)

    assert {run_id for run_id, _, _, _ in ran} == {big.pk}
    small.refresh_from_db()
    assert small.status == Run.Status.CANCELLED and small.cases_done == small.total_cases
    assert not small.cases.filter(status=CaseRow.Status.DONE).exists()

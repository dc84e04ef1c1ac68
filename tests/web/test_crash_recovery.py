"""A killed worker's case runs again: real Celery worker processes on Redis and PostgreSQL,
killed with SIGKILL in the middle of a case, with the default recovery settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.services_helpers import kill_at_once
from tests.web.worker_helpers import (
    Workers,
    assert_run_whole,
    require_redis_and_postgresql,
    run_whose_pool_child_is_killed,
    run_whose_whole_worker_is_killed,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    require_redis_and_postgresql()
    with Workers(tmp_path) as pool:
        yield pool
        kill_at_once(pool.procs)  # the run has ended: no warm shutdown to wait for


def test_a_case_whose_pool_child_is_killed_runs_again(tmp_path: Path, workers: Workers) -> None:
    run, case, _ = run_whose_pool_child_is_killed(tmp_path, workers)
    assert_run_whole(run, killed=case)


def test_a_case_whose_whole_worker_is_killed_runs_again_on_the_next_worker(
    tmp_path: Path, workers: Workers
) -> None:
    run, case = run_whose_whole_worker_is_killed(tmp_path, workers)
    assert_run_whole(run, killed=case)

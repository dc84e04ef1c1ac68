"""RabbitMQ as the broker, with PostgreSQL: a real Celery worker runs a run launched through the
view to the end, and a case whose pool child, or whole worker, is killed with SIGKILL runs again;
every case is graded once.

The broker comes from ``HOLODECK_TEST_AMQP_URL`` (``.ci/run`` sets it), not from the broker the
rest of the suite uses. Each test sends to a queue of its own, so no other worker on that
RabbitMQ (a dashboard's, say) can take its messages; the queue is deleted afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from celery import Celery
from celery._state import get_current_app
from django.db import connection
from kombu import Connection, pools
from kombu.utils.collections import eqhash
from pytest_django.fixtures import Settings

import runs.tasks  # noqa: F401 - registers the tasks with the app made below
from holodeck_web.celery import configure
from runs.models import CaseRow
from tests.web.services_helpers import kill_at_once
from tests.web.worker_helpers import (
    Workers,
    assert_run_page_shows_the_cases,
    assert_run_whole,
    run_from_the_view_to_the_end,
    run_whose_pool_child_is_killed,
    run_whose_whole_worker_is_killed,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]

URL_VARIABLE = "HOLODECK_TEST_AMQP_URL"


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def rabbitmq_unavailable() -> str | None:
    """None when PostgreSQL is the database and the test RabbitMQ answers, else why not."""
    if connection.vendor != "postgresql":
        return "the RabbitMQ tests need PostgreSQL: DATABASE_URL does not point at it"
    url = os.environ.get(URL_VARIABLE, "").strip()
    if not url:
        return (
            f"the RabbitMQ tests need a broker: {URL_VARIABLE} is not set "
            "(e.g. amqp://guest:guest@127.0.0.1:5672//)"
        )
    try:
        with Connection(url, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        return f"RabbitMQ at {redacted(url)} is unreachable: {exc}"
    return None


@dataclass
class Broker:
    url: str
    queue: str
    app: Celery

    def worker_env(self) -> dict[str, str]:
        """What a worker process needs to take this test's messages."""
        return {"CELERY_BROKER_URL": self.url, "HOLODECK_QUEUE": self.queue}


@pytest.fixture
def rabbitmq(settings: Settings) -> Iterator[Broker]:
    """This process sends its tasks to RabbitMQ, on a fresh queue, while the test runs."""
    reason = rabbitmq_unavailable()
    if reason:
        pytest.skip(reason)  # a failure in CI (HOLODECK_REQUIRE_SERVICES, tests/conftest.py)
    url = os.environ[URL_VARIABLE].strip()
    queue = f"holodeck-test-{uuid.uuid4().hex[:12]}"
    settings.BROKER_URL, settings.EMBEDDED_BROKER = url, False
    settings.HOLODECK_QUEUE, settings.CELERY_EAGER = queue, False
    app = Celery("holodeck_web", set_as_current=False)
    configure(app)
    previous = get_current_app()
    app.set_current()  # what runs.services.queue sends through
    try:
        yield Broker(url=url, queue=queue, app=app)
    finally:
        previous.set_current()
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            channel.queue_delete(queue)
            channel.exchange_delete(queue)  # Celery names the default exchange after the queue
        close_pools(app)


def close_pools(app: Celery) -> None:
    """Close this app's broker connections. kombu keeps its pools process-wide, keyed by the
    broker URL: a pool closed in place would be handed, closed, to the next test's app."""
    key = eqhash(app.connection_for_write())
    for group in (pools.producers, pools.connections):
        pool = group.pop(key, None)
        if pool is not None:
            pool.force_close_all()
    app.close()


@pytest.fixture
def workers(tmp_path: Path, rabbitmq: Broker) -> Iterator[Workers]:
    env = rabbitmq.worker_env()
    pool = Workers(tmp_path, env)
    pool.env.pop("REDIS_URL", None)  # RabbitMQ and PostgreSQL only: no Redis, even as the cache
    try:
        yield pool
        kill_at_once(pool.procs)  # the run has ended: no warm shutdown to wait for
    finally:
        pool.stop()


def test_a_worker_on_rabbitmq_runs_a_run_launched_from_the_view_to_the_end(
    tmp_path: Path, workers: Workers
) -> None:
    client, run, seen_partial = run_from_the_view_to_the_end(tmp_path, workers, seconds=120)
    assert not run.is_active, workers.logs()
    assert seen_partial, "turn rows never appeared while the run was running"
    assert_run_whole(run)
    assert set(CaseRow.objects.filter(run=run).values_list("attempts", flat=True)) == {1}
    assert_run_page_shows_the_cases(client, run)


def test_a_case_whose_pool_child_is_killed_runs_again_on_rabbitmq(
    tmp_path: Path, workers: Workers
) -> None:
    run, case, worker = run_whose_pool_child_is_killed(tmp_path, workers)
    workers.assert_alive(worker)  # the main process lives on and requeued the message
    assert workers.redelivered(), "RabbitMQ never gave the killed child's message back"
    assert_run_whole(run, killed=case)


def test_a_case_whose_whole_worker_is_killed_runs_again_on_the_next_worker_on_rabbitmq(
    tmp_path: Path, workers: Workers
) -> None:
    run, case = run_whose_whole_worker_is_killed(tmp_path, workers)
    assert workers.redelivered(), "RabbitMQ never gave the dead worker's messages back"
    assert_run_whole(run, killed=case)

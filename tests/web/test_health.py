"""/healthz and /readyz: no login, nothing revealed, and each check really fails when its
service does."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from django.db.utils import ConnectionHandler, OperationalError
from django.test import Client, override_settings

from runs.web import health

pytestmark = pytest.mark.django_db

SECRET = "db-secret.internal.example:5432 password=hunter2"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def embedded_broker(tmp_path: Path) -> Path:
    folder = tmp_path / "broker"
    for sub in health.BROKER_FOLDERS:
        (folder / sub).mkdir(parents=True)
    return folder


def assert_reveals_nothing(body: bytes) -> None:
    text = body.decode()
    for leak in ("127.0.0.1", "redis", "amqp", "sqlite", "postgres", "Traceback", "hunter2"):
        assert leak.lower() not in text.lower(), text
    assert set(text) <= set('{}":, abcdefghijklmnopqrstuvwxyz_'), text


def test_healthz_answers_ok_without_login_and_without_the_database(
    client: Client, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_probes_answer_get_only(client: Client, path: str, method: str) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 405


def test_readyz_is_ready_when_database_migrations_and_broker_answer(
    client: Client, tmp_path: Path
) -> None:
    with override_settings(
        CELERY_EAGER=False,
        EMBEDDED_BROKER=True,
        BROKER_URL=None,
        BROKER_DIR=embedded_broker(tmp_path),
    ):
        response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "broker": "ok"},
    }
    assert_reveals_nothing(response.content)


def test_readyz_fails_the_database_check_when_the_database_cannot_be_reached(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real connection with a broken setting: a file in a folder that does not exist
    # (SQLite), or a closed port (PostgreSQL).
    broken = dict(connection.settings_dict)
    if connection.vendor == "sqlite":
        broken["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
    else:
        broken.update(HOST="127.0.0.1", PORT=str(closed_port()))
        broken["OPTIONS"] = {**broken.get("OPTIONS", {}), "connect_timeout": 2}
    monkeypatch.setattr(health, "connections", ConnectionHandler({"default": broken}))
    with override_settings(CELERY_EAGER=True):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "failed",
        "migrations": "failed",
        "broker": "ok",
    }
    assert response.json()["status"] == "unavailable"
    assert_reveals_nothing(response.content)


def test_readyz_never_shows_the_databases_error_text(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError(f"could not connect to {SECRET}")

    monkeypatch.setattr(connections["default"], "cursor", refuse)
    with override_settings(CELERY_EAGER=True):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "failed"
    assert "hunter2" not in response.text and "internal" not in response.text


def test_readyz_reports_pending_migrations(client: Client) -> None:
    # Inside the test's transaction: rolled back afterwards.
    recorder = MigrationRecorder(connection)
    last = max(name for app, name in recorder.applied_migrations() if app == "runs")
    recorder.record_unapplied("runs", last)
    with override_settings(CELERY_EAGER=True):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "migrations": "pending", "broker": "ok"}


@pytest.mark.parametrize("scheme", ["redis", "amqp"])
def test_readyz_fails_the_broker_check_when_the_broker_is_down(client: Client, scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{closed_port()}/"
    with override_settings(CELERY_EAGER=False, EMBEDDED_BROKER=False, BROKER_URL=url):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "failed"}
    assert_reveals_nothing(response.content)
    assert str(url.split(":")[2]) not in response.text


def test_readyz_fails_the_broker_check_when_the_embedded_brokers_folders_are_missing(
    client: Client, tmp_path: Path
) -> None:
    with override_settings(
        CELERY_EAGER=False, EMBEDDED_BROKER=True, BROKER_URL=None, BROKER_DIR=tmp_path / "gone"
    ):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"] == "failed"


def test_readyz_is_ready_with_a_redis_broker_that_answers(client: Client) -> None:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("REDIS_URL is not set")
    with override_settings(CELERY_EAGER=False, EMBEDDED_BROKER=False, BROKER_URL=url):
        response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["broker"] == "ok"

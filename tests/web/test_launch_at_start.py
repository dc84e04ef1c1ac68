"""Launches the moment a web process starts: the task registry is filled before the first
request (RunsConfig.ready), so simultaneous first launches each answer 2xx. A real server
process (whichever server ``serve --no-worker`` runs) on SQLite and the embedded broker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.services_helpers import EXAMPLES, REPO, embedded_env, with_migrated_database
from tests.web.test_serve import answers, free_port, kill_tree, wait_for

pytestmark = pytest.mark.process

SETUP = """
from django.contrib.auth import get_user_model
from runs.services.projects import project_register
from runs.services.tokens import token_create
user = get_user_model().objects.create_user("boss", password="x", is_staff=True)
project = project_register(agent_path=__import__("pathlib").Path({agent!r}))
print(project.pk, token_create(user=user, name="t")[1])
"""


@pytest.fixture
def fresh_server(tmp_path: Path, migrated_sqlite: Path) -> Iterator[tuple[int, int, str]]:
    """(port, project id, staff token) of a just-started server that has answered nothing."""
    data = with_migrated_database(tmp_path / "data", migrated_sqlite)
    env = {**embedded_env(data), "PYTHONUNBUFFERED": "1"}
    agent = tmp_path / "agent"
    shutil.copytree(EXAMPLES / "convfinqa", agent, ignore=shutil.ignore_patterns("results"))
    manage = [sys.executable, "manage.py"]
    out = subprocess.run(
        [*manage, "shell", "-c", SETUP.format(agent=str(agent / "agent.yaml"))],
        cwd=REPO, env=env, check=True, timeout=120, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    project_id, secret = int(out[-2]), out[-1]
    port, log_path = free_port(), tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*manage, "serve", "--no-worker", "--addr", f"127.0.0.1:{port}"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            # /healthz or /login/ would be a first request; a bare TCP connect is not one.
            wait_for("the server listens", lambda: listens(port), 60, log_path)
            yield port, project_id, secret
        finally:
            kill_tree(proc)
            print(log_path.read_text()[-3000:])


def listens(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def launch(port: int, project_id: int, secret: str) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/runs",
        data=json.dumps({"project": project_id, "limit": 1}).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_five_simultaneous_launches_right_after_the_server_starts_each_answer_2xx(
    fresh_server: tuple[int, int, str],
) -> None:
    port, project_id, secret = fresh_server
    results: list[tuple[int, str]] = []
    barrier = threading.Barrier(5)

    def fire() -> None:
        barrier.wait()
        results.append(launch(port, project_id, secret))

    threads = [threading.Thread(target=fire) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    assert len(results) == 5
    assert [status for status, _ in results] == [201] * 5, results
    assert len({json.loads(body)["id"] for _, body in results}) == 5
    assert all(json.loads(body)["status"] == "queued" for _, body in results)
    assert answers(f"http://127.0.0.1:{port}/login/")

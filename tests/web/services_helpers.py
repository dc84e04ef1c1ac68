"""Helpers for service/task tests: an eager Celery app and example projects."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodeck_web.celery import app as celery_app
from runs.models import AgentProject
from runs.services.projects import project_register

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def eager_celery() -> Iterator[None]:
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = previous


def example_project(tmp_path: Path, name: str = "convfinqa") -> AgentProject:
    """A private copy of an example (so results files and edits stay in tmp)."""
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("results"))
    return project_register(agent_path=target / "agent.yaml")


def git(directory: Path, *args: str) -> str:
    """Run git in ``directory`` with a throwaway identity; its output."""
    import subprocess

    return subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()

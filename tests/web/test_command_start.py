"""``validate_agent`` and ``run_agent`` start without the web app: no API (django-ninja pulls in
``django.test``), no pages, no agent SDK or judge library the agent does not use."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "convfinqa"
NOT_NEEDED = (
    "ninja",
    "django.test",
    "holodeck_web.api",
    "runs.api",
    "runs.web",
    "semantic_kernel",
    "deepeval",
    "claude_agent_sdk",
)


def imported(tmp_path: Path, *args: str) -> set[str]:
    """The modules ``manage.py <args>`` imports (``python -X importtime``)."""
    env = {**os.environ, "HOLODECK_DATA_DIR": str(tmp_path)}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO / "manage.py"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return set(re.findall(r"^import time:.*\| +(\S+)$", done.stderr, re.MULTILINE))


def not_needed(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in NOT_NEEDED))


@pytest.mark.parametrize(
    "args",
    [
        ("validate_agent", str(EXAMPLE)),
        (
            "run_agent",
            str(EXAMPLE / "agent.yaml"),
            "--no-store",
            "--no-results-file",
            "--quiet",
        ),
    ],
    ids=["validate_agent", "run_agent"],
)
def test_a_command_imports_neither_the_web_app_nor_unused_sdks(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    modules = imported(tmp_path, *args)
    assert "runs.core.agentconfig.loader" in modules
    assert not_needed(modules) == []

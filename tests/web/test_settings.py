"""Settings come from the environment; a malformed value stops start-up with one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def manage_check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=REPO,
        env={**clean, "HOLODECK_DATA_DIR": str(tmp_path / "data"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
        ("DATABASE_URL", "nosuchdb://x/y", "DATABASE_URL='nosuchdb://x/y' is not a valid"),
        ("REDIS_URL", "http://127.0.0.1:6379", "REDIS_URL='http://127.0.0.1:6379': the scheme"),
        ("HOLODECK_WORKER_CONCURRENCY", "zero", "HOLODECK_WORKER_CONCURRENCY='zero' is not an int"),
        ("SECRET_KEY", "short", "SECRET_KEY must be at least 32 characters"),
        ("LOG_LEVEL", "loud", "LOG_LEVEL='loud' must be one of DEBUG, INFO"),
        ("HTTPS", "sure", "HTTPS='sure' is not a boolean"),
        ("HOLODECK_HEARTBEAT_SECONDS", "30", "must be at most a third of"),
    ],
)
def test_a_malformed_setting_stops_start_up_with_a_clear_message(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    done = manage_check(tmp_path, **{name: value})
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_the_defaults_need_nothing_but_a_data_directory(tmp_path: Path) -> None:
    done = manage_check(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "data" / "secret_key").is_file()  # generated once, kept private
    assert oct((tmp_path / "data" / "secret_key").stat().st_mode & 0o777) == "0o600"


def test_the_documented_production_environment_passes_the_deploy_check(tmp_path: Path) -> None:
    done = manage_check(
        tmp_path,
        "--deploy",
        "--fail-level",
        "WARNING",
        HTTPS="true",
        SECRET_KEY="k" * 10 + "-a-long-and-random-production-secret-0f9e8d7c6b5a",
        ALLOWED_HOSTS="holodeck.example.com",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_without_https_the_deploy_check_names_what_is_missing(tmp_path: Path) -> None:
    done = manage_check(tmp_path, "--deploy")
    assert "security.W004" in done.stdout + done.stderr  # no HSTS

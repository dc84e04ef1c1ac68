"""Settings come from the environment; a malformed value stops start-up with one clear line.

The settings module runs in this process (``runpy``, with the environment of each case); two
tests start ``manage.py`` for real: how a malformed value ends start-up, and the documented
production environment passing the deploy check.
"""

from __future__ import annotations

import io
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

REPO = Path(__file__).resolve().parents[2]
SETTINGS_FILE = REPO / "holodeck_web" / "settings.py"
# The shell's service URLs would override the defaults these tests are about.
SERVICE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")


def load_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    """The settings module's names, as a process started with ``env`` (and a fresh data folder)
    would have them; sys.modules and this process's settings are left alone."""
    for name in SERVICE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOLODECK_DATA_DIR", str(tmp_path / "data"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


def manage_check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES}
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
        ("HOLODECK_WORKER_PRELOAD", "anthropic,gemini", "each name must be one of anthropic"),
        ("HOLODECK_WORKER_SESSIONS", "-1", "HOLODECK_WORKER_SESSIONS"),
    ],
)
def test_a_malformed_setting_stops_start_up_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        load_settings(tmp_path, monkeypatch, **{name: value})


def test_manage_py_reports_a_malformed_setting_in_one_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    done = manage_check(tmp_path, DEBUG="maybe")
    assert done.returncode == 2
    assert done.stderr == (
        "configuration error: DEBUG='maybe' is not a boolean (use 1/0, true/false, yes/no)\n"
    )


def test_the_defaults_need_nothing_but_a_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SECRET_KEY", raising=False)

    names = load_settings(tmp_path, monkeypatch)

    data = tmp_path / "data"
    assert names["DATA_DIR"] == data.resolve()
    assert names["DATABASES"]["default"]["NAME"] == str(data.resolve() / "db.sqlite3")
    assert names["EMBEDDED_BROKER"] is True
    assert names["CACHES"]["default"]["BACKEND"].endswith("LocMemCache")
    assert (data / "secret_key").read_text() == names["SECRET_KEY"]  # generated once
    assert oct((data / "secret_key").stat().st_mode & 0o777) == "0o600"  # kept private


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


def test_without_https_the_deploy_check_names_what_is_missing(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("HTTPS", "SECURE_HSTS_SECONDS", "SECURE_SSL_REDIRECT", "HTTPS_PROXY_HEADER"):
        monkeypatch.delenv(name, raising=False)
    defaults = load_settings(tmp_path, monkeypatch)
    for name, value in defaults.items():  # this process's settings, as the defaults have them
        if name.startswith(("SECURE_", "SESSION_COOKIE_", "CSRF_COOKIE_")):
            setattr(settings, name, value)
    out, err = io.StringIO(), io.StringIO()

    call_command("check", "--deploy", "--tag", "security", stdout=out, stderr=err)

    assert "security.W004" in out.getvalue() + err.getvalue()  # no HSTS


def test_the_gates_public_url_comes_from_its_variable_else_the_trusted_origin_else_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOLODECK_PUBLIC_URL", raising=False)
    monkeypatch.delenv("CSRF_TRUSTED_ORIGINS", raising=False)
    assert load_settings(tmp_path, monkeypatch)["HOLODECK_PUBLIC_URL"] == ""
    origin = load_settings(tmp_path, monkeypatch, CSRF_TRUSTED_ORIGINS="https://evals.example.org")
    assert origin["HOLODECK_PUBLIC_URL"] == "https://evals.example.org"
    own = load_settings(tmp_path, monkeypatch, HOLODECK_PUBLIC_URL="https://holodeck.example/")
    assert own["HOLODECK_PUBLIC_URL"] == "https://holodeck.example"
    monkeypatch.setenv("HOLODECK_PUBLIC_URL", "ftp://holodeck.example")
    with pytest.raises(ImproperlyConfigured, match="HOLODECK_PUBLIC_URL"):
        load_settings(tmp_path, monkeypatch)


def test_a_worker_preloads_every_real_backend_by_default_and_can_name_any_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs.core.backends.base import BACKENDS

    monkeypatch.delenv("HOLODECK_WORKER_PRELOAD", raising=False)
    names = load_settings(tmp_path, monkeypatch)
    assert names["HOLODECK_WORKER_PRELOAD"] == ["anthropic", "openai"]
    assert set(names["PRELOAD_CHOICES"]) == {*BACKENDS, "none"}  # no backend left out
    assert (names["HOLODECK_WORKER_SESSIONS"], names["HOLODECK_WORKER_SESSION_IDLE_SECONDS"]) == (
        2,
        60,
    )

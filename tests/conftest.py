from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# Fixtures shared by the Django-side tests (eager Celery).
pytest_plugins = ["tests.web.services_helpers"]

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    # The tests create and log in many users; the production hasher spends most of a second on
    # each password by design. Only this process (and the live server's threads) use it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def shared_dir() -> Path:
    """The read-only ../shared folder (design seeds and real fixtures); absent on a user's clone."""
    if not (SHARED_DIR / "fixtures").is_dir():
        pytest.skip("../shared/fixtures is absent (only present beside the development checkout)")
    return SHARED_DIR


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


# --- one at a time under pytest-xdist ----------------------------------------------------------
# `python3 dev.py test` spreads the suite over one pytest-xdist worker per core (--dist
# loadgroup). Tests that start processes (serve, Celery workers), drive a browser or load the
# machine on purpose run one after another on one worker, beside the in-process tests on the
# others: next to each other they would fight for the cores, and their timeouts would measure
# that fight.
ONE_AT_A_TIME = ("process", "browser", "stress")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if any(item.get_closest_marker(name) for name in ONE_AT_A_TIME):
                item.add_marker(pytest.mark.xdist_group("one-at-a-time"))


# --- in CI nothing may skip -----------------------------------------------------------------
# A test skips on a developer's laptop when a service it needs is absent (PostgreSQL, Redis,
# Chromium, the Claude CLI bundled with claude-agent-sdk, ../shared). With
# HOLODECK_REQUIRE_SERVICES=1 (.ci/run sets it) every such skip is a failure instead, so a green
# CI run proves that every test ran.


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.skipped and os.environ.get("HOLODECK_REQUIRE_SERVICES"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"HOLODECK_REQUIRE_SERVICES is set, so this may not skip: {reason}"
    return report

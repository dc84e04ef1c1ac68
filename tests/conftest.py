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
# loadgroup). Tests that start processes (serve, Celery workers) or load the machine on purpose
# run one after another on one worker, and so do the tests that drive a browser (one Chromium):
# two of the same kind side by side would fight for the cores, and their timeouts would measure
# that fight. The kinds are two groups: xdist sends the largest work units first
# (--loadscope-reorder, its default), so on two workers each group starts at once on a worker
# of its own, and the in-process tests follow on both. A browser test and a process test run
# side by side, as each ran beside the in-process tests before (their timeouts are generous:
# the process tests took up to 20% longer so). As one group they were the suite's longest
# path, on one worker while the other ran out of tests (measured on two workers: the 74 tests
# took 266 s as two groups, 4 min and 3 min; their durations add up to 415 s).
GROUPS = {"process": "processes", "stress": "processes", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sqlite_only_deselect(config, items)
    if not getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        return
    for item in items:
        group = next((g for mark, g in GROUPS.items() if item.get_closest_marker(mark)), None)
        if group is not None:
            join_group(item, group)


def sqlite_only_deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On PostgreSQL, the tests marked ``sqlite`` (the embedded database's own index) are left
    out rather than skipped: a test of theirs runs them on SQLite in a process of its own
    (``tests/web/test_text_search_index.py``), so CI runs them too."""
    from django.conf import settings

    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        return
    left = [item for item in items if item.get_closest_marker("sqlite") is not None]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item.get_closest_marker("sqlite") is None]


def join_group(item: pytest.Item, group: str) -> None:
    """What ``@pytest.mark.xdist_group(group)`` does: the node id ends in ``@group``, and the
    controller schedules the tests whose ids end alike as one unit, on one worker. xdist 3.8
    writes the suffix where pytest 9.2 no longer reads the id, so its mark groups nothing
    (pytest-dev/pytest-xdist#1386); this writes it where pytest reads it."""
    nodeid = f"{item.nodeid}@{group}"
    structured = getattr(item, "_id", None)
    if structured is not None:  # pytest >= 9.2: a NodeId
        item._id = type(structured).parse(nodeid)
    else:
        item._nodeid = nodeid  # type: ignore[attr-defined]


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

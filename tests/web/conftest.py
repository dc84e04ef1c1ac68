from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import AgentProject
from tests.web.chromium import SHARED_CHROMIUM
from tests.web.factories import make_project, make_user


@pytest.fixture
def viewer(db: None) -> User:
    return make_user("viewer")


@pytest.fixture
def staff(db: None) -> User:
    return make_user("operator", staff=True)


@pytest.fixture
def viewer_client(client: Client, viewer: User) -> Client:
    client.force_login(viewer)
    return client


@pytest.fixture
def staff_client(client: Client, staff: User) -> Client:
    client.force_login(staff)
    return client


@pytest.fixture
def project(db: None) -> AgentProject:
    return make_project()


@pytest.fixture
def chromium() -> Any:
    """Headless Chromium, shared by consecutive browser tests (tests/web/chromium.py)."""
    return SHARED_CHROMIUM.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    try:
        return (yield)
    finally:  # after the test's fixtures: stop the browser before a test that is not a browser's
        if nextitem is None or nextitem.get_closest_marker("browser") is None:
            SHARED_CHROMIUM.stop()

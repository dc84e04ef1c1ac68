from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import AgentProject
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

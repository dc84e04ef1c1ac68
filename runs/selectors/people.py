"""Users as the roles pages and the audit log read them: a user by name, every project role a
user holds (one query), the users a roles form offers."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from runs.core.reviewing.vocabulary import Role
from runs.review_models import ProjectRole


def user_named(*, username: str) -> Any | None:
    """The active user called ``username``, or None."""
    return get_user_model().objects.filter(username=username, is_active=True).first()


def roles_of(*, user: Any) -> dict[int, Role]:
    """Every role ``user`` was given, by project id (one query): the projects not in it they
    read as a viewer."""
    given = ProjectRole.objects.filter(user=user).values_list("project_id", "role")
    return {project_id: Role(role) for project_id, role in given}


def usernames(*, most: int = 1000) -> list[str]:
    """The active users' names, by name: what the roles form's name field suggests."""
    users = get_user_model().objects.filter(is_active=True).order_by("username")
    return list(users.values_list("username", flat=True)[:most])

"""Who may do what in a project (``runs.core.reviewing.vocabulary.Role``): staff everything
everywhere; a signed-in user their role's rights in a project (viewer without one); anonymous
nothing. A run without a project (an import without one) is written to by staff only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.core.reviewing.vocabulary import Role
from runs.review_models import ProjectRole


def project_role(
    *, user: Any, project_id: int | None, roles: Mapping[int, Role] | None = None
) -> Role | None:
    """The user's role in the project: admin for staff, None for anonymous, viewer when none
    was given. ``roles``: every role the user was given, by project id, when the caller has
    read them already (``runs.selectors.people.roles_of``); else one query."""
    if user is None or not user.is_authenticated:
        return None
    if user.is_staff:
        return Role.ADMIN
    if project_id is None:
        return Role.VIEWER
    if roles is not None:
        return roles.get(int(project_id), Role.VIEWER)
    stored = (
        ProjectRole.objects.filter(project_id=project_id, user=user)
        .values_list("role", flat=True)
        .first()
    )
    return Role(stored) if stored else Role.VIEWER


def user_can(*, user: Any, project_id: int | None, needed: Role) -> bool:
    role = project_role(user=user, project_id=project_id)
    return role is not None and role.allows(needed)


def project_roles(*, project_id: int) -> list[ProjectRole]:
    """The roles given in a project, by user name."""
    return list(
        ProjectRole.objects.filter(project_id=project_id)
        .select_related("user")
        .order_by("user__username")
    )

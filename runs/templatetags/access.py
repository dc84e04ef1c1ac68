"""What the signed-in user may do in a project, for the buttons a page shows or hides:
``{% if user|may_run:run.project_id %}``. The pages' and the API's checks are the guards
(``runs.web.views.role_required``, ``runs.api.auth.role_only``); these only keep a page from
offering what would be refused. A user's roles are read once per request
(``runs.shared.access.role_in``)."""

from __future__ import annotations

from typing import Any

from django import template

from runs.core.reviewing.vocabulary import Role
from runs.shared.access import role_in

register = template.Library()


def _may(user: Any, project_id: int | str | None, needed: Role) -> bool:
    if project_id is None or project_id == "":
        # A run of no project: staff only.
        return bool(getattr(user, "is_staff", False))
    role = role_in(user=user, project_id=int(project_id))
    return role is not None and role.allows(needed)


@register.filter
def may_review(user: Any, project_id: int | None) -> bool:
    """Review the turns and cases of the project's runs (reviewer or higher, or staff)."""
    return _may(user, project_id, Role.REVIEWER)


@register.filter
def may_run(user: Any, project_id: int | None) -> bool:
    """Launch, cancel, keep, re-run and re-grade the project's runs (runner or higher)."""
    return _may(user, project_id, Role.RUNNER)


@register.filter
def may_admin(user: Any, project_id: int | None) -> bool:
    """Edit or remove the project, manage its roles and triage categories (admin)."""
    return _may(user, project_id, Role.ADMIN)

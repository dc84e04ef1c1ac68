"""Who may do what in a project, in the words a refusal says (a page's 403 and the API's):
``runs.selectors.access`` decides, this says why not.

Staff may do everything everywhere; a signed-in user their role's rights in the project (a
viewer without a role); a run that belongs to no project is written to by staff only.
"""

from __future__ import annotations

from typing import Any

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.selectors.access import project_role, user_can
from runs.selectors.people import roles_of

# Where a user's roles are kept for the rest of the request (on the request's user object).
_ROLES = "_holodeck_roles"


def refusal(*, user: Any, project_id: int | None, needed: Role, action: str) -> str | None:
    """None when ``user`` holds ``needed`` in the project; else why not, in a sentence that
    names the role, the project and the ``action`` ("launch runs") refused."""
    if user_can(user=user, project_id=project_id, needed=needed):
        return None
    if user is None or not user.is_authenticated:
        return f"Sign in to {action}."
    if project_id is None:
        return f"Only staff can {action} that belong to no project."
    project = selectors.project_find(project_id=project_id)
    name = project.name if project is not None else f"#{project_id}"
    return f"You need the {needed} role in project {name} to {action}; ask a project admin."


def role_in(*, user: Any, project_id: int | None) -> Role | None:
    """The user's role in the project, as the buttons of a page (and the API's answers) show
    it: None for anonymous, admin for staff, viewer without a role. Every role of the user is
    read once per request, in one query (none for staff); the guards ask ``user_can`` anew."""
    roles: dict[int, Role] | None = None
    if user is not None and user.is_authenticated and not user.is_staff:
        roles = getattr(user, _ROLES, None)
        if roles is None:
            roles = roles_of(user=user)
            setattr(user, _ROLES, roles)
    return project_role(user=user, project_id=project_id, roles=roles)

"""The audit log's one write: every accepted write of a review, a role, a category or a project
is recorded with who, what, when, and the object before and after (a refused one writes
nothing: callers write it only once their write is done, in its transaction)."""

from __future__ import annotations

from typing import Any

from runs.review_models import AuditEntry


def audit_write(
    *,
    user: Any,
    action: str,
    object_type: str,
    object_id: int | None,
    project_id: int | None,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> AuditEntry:
    signed_in = user is not None and user.is_authenticated
    return AuditEntry.objects.create(
        user=user if signed_in else None,
        username=user.get_username() if signed_in else "",
        action=action,
        object_type=object_type,
        object_id=object_id,
        project_id=project_id,
        before=before,
        after=after,
    )

"""The audit log, for staff: every accepted write of a review, a role, a triage category or a
project, newest first, filtered like the audit page."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from ninja.pagination import paginate

from runs.api.auth import staff_only
from runs.api.schemas import BoundedPagination, Id, SafeText, responses
from runs.selectors.audit import AuditFilters, audit_entries

router = Router(tags=["audit"])


class AuditEntryOut(Schema):
    """One write: who (``user``: the name it was written under, "" from the command line),
    when, what (``action``, the object's type and id, its project) and the object's fields
    before and after (null: it did not exist before, or no longer after)."""

    id: int
    at: datetime
    user: str = Field(description="the user's name when they wrote it")
    action: str = Field(description="review.save, review.reopen, role.set, category.save, "
                        "project.register, project.edit or project.remove")  # fmt: skip
    object_type: str
    object_id: int | None
    project_id: int | None
    project_name: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @staticmethod
    def resolve_user(entry: Any) -> str:
        return str(entry.username)

    @staticmethod
    def resolve_project_name(entry: Any) -> str | None:
        return entry.project.name if entry.project_id and entry.project else None


class AuditQuery(Schema):
    project: Id | None = Field(None, description="only this project's writes")
    user: SafeText | None = Field(None, description="only the writes of this user name")
    action: SafeText | None = Field(None, description="only this action, e.g. role.set")


@router.get("/audit", response=responses({200: list[AuditEntryOut]}, 403))
@paginate(BoundedPagination)
def audit_list(request: HttpRequest, filters: Query[AuditQuery]) -> object:
    """The audit log, newest first. Staff only."""
    staff_only(request, "read the audit log")
    return audit_entries(
        filters=AuditFilters(
            project=filters.project, user=filters.user or "", action=filters.action or ""
        )
    )

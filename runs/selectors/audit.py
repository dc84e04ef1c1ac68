"""The audit log as staff read it (the audit page and ``GET /api/v1/audit``): newest first,
filtered by project, user name and action."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from runs.review_models import AuditEntry

# The writes the log records (``runs.services``); the filter offers these and any other found.
AUDIT_ACTIONS = (
    "review.save",
    "review.reopen",
    "role.set",
    "category.save",
    "project.register",
    "project.edit",
    "project.remove",
)


@dataclass(frozen=True)
class AuditFilters:
    """``project``: its id (None: every project, and writes of none); ``user``: the name the
    entry was written under; ``action``: one of the log's actions ("" for all)."""

    project: int | None = None
    user: str = ""
    action: str = ""


def audit_entries(*, filters: AuditFilters) -> QuerySet[AuditEntry]:
    """The entries that match, newest first, each with its project's name (one query a page)."""
    entries = AuditEntry.objects.select_related("project").order_by("-at", "-id")
    if filters.project is not None:
        entries = entries.filter(project_id=filters.project)
    if filters.user:
        entries = entries.filter(username=filters.user)
    if filters.action:
        entries = entries.filter(action=filters.action)
    return entries


def audit_actions() -> list[str]:
    """The actions the filter offers: the known ones, then any other the log holds."""
    found = AuditEntry.objects.order_by().values_list("action", flat=True).distinct()
    return [*AUDIT_ACTIONS, *sorted(set(found) - set(AUDIT_ACTIONS))]


def audit_usernames() -> list[str]:
    """The names the log's entries were written under, by name."""
    names = AuditEntry.objects.exclude(username="").order_by("username")
    return list(names.values_list("username", flat=True).distinct())

"""The audit log (``/audit/``, staff only): every accepted write of a review, a role, a triage
category or a project — who, when, what, and the fields it changed — newest first, filtered by
project, user and action, a page at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs import selectors
from runs.selectors.audit import AuditFilters, audit_actions, audit_entries, audit_usernames
from runs.web.params import choice_param, int_param, page_param, text_param

if TYPE_CHECKING:
    from runs.review_models import AuditEntry

ENTRIES_PER_PAGE = 50


@dataclass(frozen=True)
class FieldChange:
    """One field of an entry: its value before and after ("" where it had none)."""

    field: str
    before: str
    after: str


@dataclass(frozen=True)
class AuditRow:
    entry: AuditEntry
    changes: list[FieldChange]


def changes_of(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[FieldChange]:
    """The fields an entry changed (all of them for a creation or a removal), in the order the
    object lists them."""
    old, new = before or {}, after or {}
    fields = [*old, *(field for field in new if field not in old)]
    return [
        FieldChange(field, _text(old.get(field)), _text(new.get(field)))
        for field in fields
        if before is None or after is None or old.get(field) != new.get(field)
    ]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can read the audit log.")
    actions = audit_actions()
    filters = AuditFilters(
        project=int_param(request, "project", minimum=1),
        user=text_param(request, "user", max_length=150),
        action=choice_param(request, "action", actions),
    )
    page = Paginator(audit_entries(filters=filters), ENTRIES_PER_PAGE).get_page(
        page_param(request, "page")
    )
    kept = {"project": filters.project or "", "user": filters.user, "action": filters.action}
    context = {
        "page": page,
        "rows": [AuditRow(entry, changes_of(entry.before, entry.after)) for entry in page],
        "filters": filters,
        "actions": actions,
        "projects": selectors.project_choices(),
        "usernames": audit_usernames(),
        # What the pager keeps from page to page.
        "filter_query": urlencode({key: value for key, value in kept.items() if value}),
    }
    return render(request, "runs/audit.html", context)

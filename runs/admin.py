"""Admin: projects are registered here; runs and results are read-mostly (runs write them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.models import AgentProject, CaseResult, Run, TurnResult


@admin.register(AgentProject)
class AgentProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "directory", "agent_file", "created_at")
    search_fields = ("name", "directory", "description")


class _ReadOnlyAdmin(admin.ModelAdmin):
    """Results are written by runs, never by hand; deleting stays possible for clean-up."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(_ReadOnlyAdmin):
    list_display = (
        "id",
        "agent_name",
        "project",
        "status",
        "source",
        "git_commit",
        "passed_cases",
        "total_cases",
        "created_at",
    )
    list_filter = ("status", "source", "project", "git_dirty")
    search_fields = ("agent_name", "git_commit", "git_branch")
    date_hierarchy = "created_at"
    list_select_related = ("project",)
    # The raw YAML is large; it stays out of the admin form.
    exclude = ("raw_yaml",)


class TurnInline(admin.TabularInline):
    model = TurnResult
    fields = ("index", "passed", "skipped", "tools_matched", "execution_time_ms", "input")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CaseResult)
class CaseResultAdmin(_ReadOnlyAdmin):
    list_display = ("id", "run", "index", "name", "status", "passed", "turn_count")
    list_filter = ("status", "passed", "is_multi_turn")
    search_fields = ("name",)
    list_select_related = ("run",)
    raw_id_fields = ("run",)
    inlines = (TurnInline,)

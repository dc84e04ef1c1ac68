"""Admin: projects are registered here; runs and results are read-mostly (runs write them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from runs.models import AgentProject, ApiToken, CaseRow, Run, TurnRow
from runs.services.tokens import token_revoke


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
    model = TurnRow
    fields = ("index", "passed", "skipped", "tools_matched", "execution_time_ms", "input")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CaseRow)
class CaseResultAdmin(_ReadOnlyAdmin):
    list_display = ("id", "run", "index", "name", "status", "passed", "turn_count")
    list_filter = ("status", "passed", "is_multi_turn")
    search_fields = ("name",)
    list_select_related = ("run",)
    raw_id_fields = ("run",)
    inlines = (TurnInline,)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created on the Tokens page (the secret is shown there once); here they are
    listed and revoked. The digest is shown read-only; the secret is never stored."""

    list_display = ("name", "user", "prefix", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("user__username", "user__email", "name", "prefix")
    list_select_related = ("user",)
    readonly_fields = ("user", "prefix", "digest", "created_at", "revoked_at")
    fields = ("name", "user", "prefix", "digest", "created_at", "revoked_at")
    date_hierarchy = "created_at"
    actions = ("revoke_tokens",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(token_revoke(token=token) for token in queryset)
        already = queryset.count() - revoked
        note = f" ({already} revoked already)" if already else ""
        self.message_user(
            request,
            f"{revoked} token{'s' if revoked != 1 else ''} revoked{note}.",
            messages.SUCCESS,
        )

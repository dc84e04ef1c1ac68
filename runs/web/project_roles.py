"""A project's roles and triage categories (``/projects/<id>/roles/``), for its admins and
staff: who holds which role (give one, change it, take it away), and the categories its
reviewers triage failures into (add, rename, change the key, archive). Every accepted change is
in the audit log (the services write it); a refused one changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.selectors.access import project_roles as roles_given
from runs.selectors.people import user_named, usernames
from runs.selectors.reviews import project_categories
from runs.services.reviews import ReviewError, categories_ensure, category_save, role_set
from runs.web.params import AsciiIntegerField
from runs.web.views import form_page, project_of_page, role_required

if TYPE_CHECKING:
    from runs.models import AgentProject

ROLE_CHOICES = [("", "none (a viewer)"), *Role.choices()]


class RoleForm(forms.Form):
    username = forms.CharField(max_length=150, label="User")
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False, label="Role")


class CategoryForm(forms.Form):
    # The category changed (none: a new one); a default category not stored yet is named by
    # ``was`` instead.
    category = AsciiIntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    was = forms.CharField(required=False, max_length=80, widget=forms.HiddenInput)
    name = forms.CharField(max_length=80, label="Name")
    key = forms.CharField(required=False, max_length=1, strip=False, label="Key")
    archived = forms.BooleanField(required=False, label="Archived")


@role_required(Role.ADMIN, action="manage this project's roles", project_of=project_of_page)
@require_GET
def project_roles(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get(project_id=project_id)
    return form_page(request, "runs/project_roles.html", _context(project))


@role_required(Role.ADMIN, action="manage this project's roles", project_of=project_of_page)
@require_POST
def project_role_set(request: HttpRequest, project_id: int) -> HttpResponse:
    """Give a user a role in the project, change it, or take it away (no role: a viewer)."""

    project = selectors.project_get(project_id=project_id)
    form = RoleForm(request.POST)
    if form.is_valid():
        name, role = form.cleaned_data["username"].strip(), form.cleaned_data["role"]
        user = user_named(username=name)
        if user is None:
            form.add_error("username", f"no active user is called {name!r}")
        else:
            try:
                role_set(by=request.user, project_id=project.pk, user_id=user.pk, role=role)
            except ReviewError as exc:
                form.add_error("role", str(exc))
            else:
                said = f"is now {role}" if role else "holds no role now (a viewer)"
                messages.success(request, f"{name} {said} in {project.name}.")
                return redirect("project_roles", project_id=project.pk)
    return form_page(request, "runs/project_roles.html", _context(project, role_form=form))


@role_required(
    Role.ADMIN, action="manage this project's triage categories", project_of=project_of_page
)
@require_POST
def project_category_save(request: HttpRequest, project_id: int) -> HttpResponse:
    """Add a triage category to the project, or rename, re-key or archive one."""

    project = selectors.project_get(project_id=project_id)
    form = CategoryForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        category_id = data["category"]
        if category_id is None and data["was"]:  # a default one, stored now to be changed
            named = {c.name: c.pk for c in categories_ensure(project_id=project.pk)}
            category_id = named.get(data["was"], 0)
        try:
            category_save(user=request.user, project_id=project.pk, name=data["name"],
                          key=data["key"].strip(), archived=data["archived"],
                          category_id=category_id)  # fmt: skip
        except ReviewError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        except ObjectDoesNotExist:  # another project's category, or one renamed meanwhile
            form.add_error(None, "no such category in this project: reload the page")
        else:
            messages.success(request, f"Category {' '.join(data['name'].split())!r} saved.")
            return redirect("project_roles", project_id=project.pk)
    return form_page(request, "runs/project_roles.html", _context(project, category_form=form))


def _context(
    project: AgentProject,
    *,
    role_form: RoleForm | None = None,
    category_form: CategoryForm | None = None,
) -> dict[str, Any]:
    return {
        "project": project,
        "roles": roles_given(project_id=project.pk),
        "role_choices": ROLE_CHOICES,
        "role_form": role_form or RoleForm(),
        "categories": project_categories(project_id=project.pk),
        "category_form": category_form or CategoryForm(),
        "usernames": usernames(),
    }

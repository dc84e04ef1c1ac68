"""Projects: list, detail (with the caller's role in each), register an agent directory the
server can read; a project's roles and triage categories, managed by its admins."""

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.pagination import paginate

from runs import selectors
from runs.api.auth import role_only, staff_only
from runs.api.schemas import BoundedPagination, Id, SafeText, responses
from runs.core.reviewing.vocabulary import Role
from runs.selectors.access import project_roles
from runs.selectors.people import user_named
from runs.selectors.reviews import project_categories
from runs.services.projects import project_register as register
from runs.services.reviews import ReviewError, category_save, role_set
from runs.shared.access import role_in

router = Router(tags=["projects"])


class ProjectOut(Schema):
    id: int
    name: str
    directory: str
    agent_file: str
    description: str
    created_at: datetime
    last_run_id: int | None = None
    last_run_status: str | None = None
    role: Role | None = Field(
        None,
        description="your role in the project: viewer (read), reviewer (also review), runner "
        "(also launch, cancel, keep, re-run), admin (also edit, remove, roles, categories); "
        "staff are admin everywhere",
    )

    @staticmethod
    def resolve_role(project: Any, context: Any) -> Role | None:
        request = context["request"]
        return role_in(user=getattr(request, "auth", None), project_id=project.pk)


class ProjectRegisterIn(Schema):
    """``path``: an agent.yaml (or the directory holding one) on the server's file system."""

    path: SafeText
    name: SafeText | None = None


@router.get("/projects", response=responses({200: list[ProjectOut]}))
@paginate(BoundedPagination)
def project_list(request: HttpRequest) -> object:
    return selectors.project_list()


@router.get("/projects/{project_id}", response=responses({200: ProjectOut}, 404))
def project_detail(request: HttpRequest, project_id: Id) -> object:
    return selectors.project_listed(project_id=project_id)


@router.post("/projects", response=responses({201: ProjectOut}, 403, 422))
def project_register(request: HttpRequest, payload: ProjectRegisterIn) -> object:
    staff_only(request, "register projects")

    path = Path(payload.path).expanduser()
    if path.is_dir():
        path = path / "agent.yaml"
    if not path.is_file():
        raise HttpError(422, f"{path} is not a file the server can read")
    project = register(agent_path=path, name=payload.name, user=request.auth)  # type: ignore[attr-defined]
    return 201, selectors.project_listed(project_id=project.pk)


# --- roles and triage categories ----------------------------------------------------------


class RoleOut(Schema):
    user: str = Field(description="the user's name")
    role: Role | None = Field(description="null: no role (a viewer)")


class RoleIn(Schema):
    user: SafeText = Field(description="the user's name")
    role: Literal["viewer", "reviewer", "runner", "admin", ""] = Field(
        description='the role to give; "" takes the role away (a viewer again)'
    )


def _admin_of(request: HttpRequest, project_id: int, action: str) -> int:
    project = selectors.project_get(project_id=project_id)
    role_only(request, project_id=project.pk, needed=Role.ADMIN, action=action)
    return int(project.pk)


@router.get("/projects/{project_id}/roles", response=responses({200: list[RoleOut]}, 403, 404))
def project_role_list(request: HttpRequest, project_id: Id) -> object:
    """The roles given in the project (every other user is a viewer). Its admins and staff."""
    pk = _admin_of(request, project_id, "read this project's roles")
    return [
        {"user": given.user.username, "role": given.role} for given in project_roles(project_id=pk)
    ]


@router.post("/projects/{project_id}/roles", response=responses({200: RoleOut}, 403, 404, 422))
def project_role_set(request: HttpRequest, project_id: Id, payload: RoleIn) -> object:
    """Give a user a role in the project, change it, or take it away (``"role": ""``); written to
    the audit log. Its admins and staff."""

    pk = _admin_of(request, project_id, "manage this project's roles")
    user = user_named(username=payload.user.strip())
    if user is None:
        return 422, {"detail": [{"loc": ["body", "user"], "msg": "no active user of that name"}]}
    role_set(by=request.auth, project_id=pk, user_id=user.pk, role=payload.role)  # type: ignore[attr-defined]
    return {"user": user.get_username(), "role": payload.role or None}


class CategoryOut(Schema):
    id: int | None = Field(description="null: a default category, stored at its first change")
    name: str
    key: str = Field(description="the key that picks it in the review queue")
    archived: bool


class CategoryIn(Schema):
    id: Id | None = Field(None, description="the category to change; none: a new one")
    name: SafeText = Field(description="1 to 80 characters, unique in the project")
    key: str = Field("", max_length=1, description="one character, or none")
    archived: bool = False


@router.get("/projects/{project_id}/categories", response=responses({200: list[CategoryOut]}, 404))
def project_category_list(request: HttpRequest, project_id: Id) -> object:
    """The project's triage categories (its defaults until one is changed)."""
    project = selectors.project_get(project_id=project_id)
    return project_categories(project_id=project.pk)


@router.post(
    "/projects/{project_id}/categories",
    response=responses({200: CategoryOut, 201: CategoryOut}, 403, 404, 422),
)
def project_category_save(request: HttpRequest, project_id: Id, payload: CategoryIn) -> object:
    """Add a triage category (201), or rename, re-key or archive one (200); written to the
    audit log. Its admins and staff."""

    pk = _admin_of(request, project_id, "manage this project's triage categories")
    try:
        category = category_save(user=request.auth, project_id=pk, name=payload.name,  # type: ignore[attr-defined]
                                 key=payload.key, archived=payload.archived,
                                 category_id=payload.id)  # fmt: skip
    except ObjectDoesNotExist:
        return 404, {"detail": f"project {pk} has no category {payload.id}"}
    except ReviewError as exc:
        return 422, {"detail": [{"loc": ["body", exc.field], "msg": str(exc)}]}
    return (200 if payload.id else 201), category

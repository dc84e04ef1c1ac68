"""Projects: list, detail, register an agent directory the server can read."""

from datetime import datetime
from pathlib import Path

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError
from ninja.pagination import paginate

from runs import selectors
from runs.api.auth import staff_only
from runs.api.schemas import BoundedPagination, Id, SafeText, responses

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
    from runs.services.projects import project_register as register

    path = Path(payload.path).expanduser()
    if path.is_dir():
        path = path / "agent.yaml"
    if not path.is_file():
        raise HttpError(422, f"{path} is not a file the server can read")
    project = register(agent_path=path, name=payload.name)
    return 201, selectors.project_listed(project_id=project.pk)

"""Register, edit and remove agent projects (directories holding an agent.yaml); each accepted
write is in the audit log with the project's fields before and after (``user``: who; none from
the command line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.loader import load_agent
from runs.models import AgentProject, Run
from runs.review_models import Review
from runs.services.audit import audit_write
from runs.services.retention import runs_delete

NAME_MAX = AgentProject._meta.get_field("name").max_length or 200


class ProjectError(Exception):
    """A project cannot be registered, changed or removed; nothing was saved.

    ``field`` names the form field at fault, if one is.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def agent_file_of(path: Path) -> Path:
    """The agent.yaml ``path`` names: the file itself, or the agent.yaml in a directory."""
    return path / "agent.yaml" if path.is_dir() else path


def project_register(
    *, agent_path: Path, name: str | None = None, validate: bool = False, user: Any = None
) -> AgentProject:
    """Register (or update) the project whose agent.yaml is ``agent_path`` (or a directory
    holding one). Its name is ``name``, else the agent's; its description is the agent's.

    With ``validate`` the agent must load: every problem is raised in one ConfigError and
    nothing is saved (the dashboard's form); nor is a name another project has (ProjectError).
    Without, an agent that does not load is registered under its directory's name
    (``manage.py register_project``: fix it later).
    Raises FileNotFoundError when there is no such file.
    """

    agent_path = agent_file_of(agent_path.expanduser()).resolve()
    if not agent_path.is_file():
        raise FileNotFoundError(f"{agent_path} does not exist")
    name = (name or "").strip() or None
    if name is not None and len(name) > NAME_MAX:
        raise ProjectError(f"a name is at most {NAME_MAX} characters", field="name")
    description = ""
    try:
        agent = load_agent(agent_path)
    except ConfigError:
        if validate:
            raise
        agent = None
    except OSError as exc:
        if validate:
            problem = ConfigProblem(agent_path.name, None, None, "", f"cannot read it: {exc}")
            raise ConfigError([problem]) from exc
        agent = None
    if agent is not None:
        name = name or agent.config.name
        description = agent.config.description or ""
    name = name or agent_path.parent.name
    if validate:
        taken = AgentProject.objects.filter(name=name).first()
        if taken is not None and taken.agent_path != agent_path:
            raise ProjectError(
                f"another project is called {name!r} ({taken.agent_path}): give another name",
                field="name",
            )
    fields = {
        "directory": str(agent_path.parent),
        "agent_file": agent_path.name,
        "description": description,
    }
    with transaction.atomic():
        found = AgentProject.objects.select_for_update().filter(name=name).first()
        before = project_fields(found) if found is not None else None
        project, _ = AgentProject.objects.update_or_create(name=name, defaults=fields)
        _audited(project, user, "project.register", before)
    return project


def project_fields(project: AgentProject) -> dict[str, Any]:
    """What the audit log keeps of a project."""
    return {
        "name": project.name,
        "directory": project.directory,
        "agent_file": project.agent_file,
        "description": project.description,
    }


def _audited(project: AgentProject, user: Any, action: str, before: dict[str, Any] | None) -> None:
    """The write in the audit log, unless it changed nothing (registering a project again)."""
    after = project_fields(project)
    if before != after:
        audit_write(user=user, action=action, object_type="project", object_id=project.pk,
                    project_id=project.pk, before=before, after=after)  # fmt: skip


def project_update(
    *, project: AgentProject, name: str, description: str, user: Any = None
) -> AgentProject:
    """Rename the project and/or change its description. Raises ProjectError for an empty
    name, or one another project has."""
    name = name.strip()
    if not name:
        raise ProjectError("a project needs a name", field="name")
    if len(name) > NAME_MAX:
        raise ProjectError(f"a name is at most {NAME_MAX} characters", field="name")
    if AgentProject.objects.filter(name=name).exclude(pk=project.pk).exists():
        raise ProjectError(f"another project is called {name!r}", field="name")
    before = project_fields(project)
    project.name, project.description = name, description.strip()
    with transaction.atomic():
        project.save(update_fields=["name", "description"])
        _audited(project, user, "project.edit", before)
    return project


def project_remove(*, project: AgentProject, delete_runs: bool, user: Any = None) -> int:
    """Remove the project. Its runs are kept (they stay listed, under their agent's name,
    with no project) or, with ``delete_runs``, deleted with their cases, turns and metrics
    (and the snapshots no other run uses). Returns the number of runs deleted.

    Refused (ProjectError) while one of its runs is queued or running: cancel it first.
    """

    runs = Run.objects.filter(project=project)
    active = runs.filter(status__in=Run.ACTIVE).count()
    if active:
        raise ProjectError(
            f"{active} run{'s' if active != 1 else ''} of {project.name} "
            f"{'is' if active == 1 else 'are'} queued or running: cancel "
            f"{'it' if active == 1 else 'them'} first"
        )
    if delete_runs:
        with transaction.atomic():
            _reviews_delete(project)  # the bulk deletes of runs_delete skip the rows' cascades
        deleted = runs_delete(runs=runs).runs
    else:
        deleted = 0
    runs_said = {"runs": "deleted", "runs_deleted": deleted} if delete_runs else {"runs": "kept"}
    before = {**project_fields(project), **runs_said}
    project_id = project.pk
    try:
        with transaction.atomic():
            _reviews_delete(project)
            # Runs kept: SET_NULL on their project; the agent name they carry still lists them.
            project.delete()
            # Its own entries lose their project (SET_NULL): this one names it by id.
            audit_write(user=user, action="project.remove", object_type="project",
                        object_id=project_id, project_id=None, before=before,
                        after=None)  # fmt: skip
    except IntegrityError as exc:
        # A result file is imported once among the runs with no project: one of these runs
        # and a run already without a project were imported from the same file.
        raise ProjectError(
            f"a run of {project.name} and a run with no project were imported from the same "
            "result file: delete one of them, or delete the project's runs with it"
        ) from exc
    return deleted


def _reviews_delete(project: AgentProject) -> None:
    """The project's reviews (and their history) go with it, first: they hold its triage
    categories (PROTECT) and its runs' turns, which would refuse the project's deletion."""
    Review.objects.filter(project=project).delete()

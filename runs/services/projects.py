"""Register agent projects (directories holding an agent.yaml)."""

from __future__ import annotations

from pathlib import Path

from runs.models import AgentProject
from runs.spec.errors import ConfigError


def project_register(*, agent_path: Path, name: str | None = None) -> AgentProject:
    """Register (or update) the project whose agent.yaml is ``agent_path``."""
    from runs.spec.loader import load_agent

    agent_path = agent_path.resolve()
    if not agent_path.is_file():
        raise FileNotFoundError(f"{agent_path} does not exist")
    description = ""
    if name is None:
        try:
            agent = load_agent(agent_path)
            name, description = agent.config.name, agent.config.description or ""
        except ConfigError:
            name = agent_path.parent.name
    project, _ = AgentProject.objects.update_or_create(
        name=name,
        defaults={
            "directory": str(agent_path.parent),
            "agent_file": agent_path.name,
            "description": description,
        },
    )
    return project

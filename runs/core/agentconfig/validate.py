"""What ``manage.py validate_agent`` reports for an agent.yaml (Django-free, no DB needed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.loader import load_agent

EXIT_OK = 0
EXIT_INVALID = 2


def validate_agent_file(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> tuple[int, list[str]]:
    """(exit code, lines): ``OK: <name>: N test cases, M turns`` then ``warning: ...`` for each
    HoloDeck field that has no effect here, or one line per problem."""
    try:
        agent = load_agent(path, environ=environ)
    except ConfigError as exc:
        return EXIT_INVALID, exc.lines()
    cases = agent.config.test_cases
    turns = sum(len(case.as_turns()) for case in cases)
    noun = "test case" if len(cases) == 1 else "test cases"
    turn_noun = "turn" if turns == 1 else "turns"
    ok = f"OK: {agent.config.name}: {len(cases)} {noun}, {turns} {turn_noun}"
    return EXIT_OK, [ok, *(f"warning: {line}" for line in agent.warnings)]

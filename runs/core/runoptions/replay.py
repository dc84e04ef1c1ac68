"""What a what-if replay changes, and what its run says it changed (Django-free).

A replay (``runs.services.replay``) runs some cases of a settled run again with changes — the
system prompt (edited text, or another file of the agent), the model or its parameters, or the
agent at another commit — while its tools answer from the original's recording
(``runs.core.backends.replay``). ``ReplayChanges`` is what was asked (the form's, the API's and the
command's one shape); ``ReplayPick`` is what the replay's run stores in ``Run.options``
(``RunOptions.replay``): the original, the tool policy, the changes as they were applied (the
prompt's whole text, so a worker never reads a file again) and the values they replaced, so its
page says "model gpt-4o → gpt-4o-mini" without reading the original. ``agent_changed`` applies
a pick to a loaded agent, in the launch (what the run records) and in the worker (what runs).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runs.core.agentconfig.limits import Temperature, TokenCount, TopP
from runs.core.agentconfig.model import Instructions
from runs.core.backends.replay import DEFAULT_POLICY, POLICIES, Policy
from runs.core.wire.transcripts import EDITED_PROMPT_SOURCE

__all__ = ["DEFAULT_POLICY", "POLICIES", "Policy"]

# What each policy does, one line each (the form, the docs, the command's help).
POLICY_TEXTS: dict[Policy, str] = {
    "recorded-only": "a call that matches a recorded call returns its recorded result; any "
    "other call fails with an error naming it (no tool runs)",
    "recorded-then-live": "a matching call returns its recorded result; any other call runs "
    "the real tool",
    "live": "every call runs the real tool (only the prompt, model or commit change)",
}

# The model parameters a replay may change (the agent.yaml's model block's own names).
PARAMS = ("temperature", "max_tokens", "top_p")


class ReplayParams(BaseModel):
    """Model parameters to change; None: as the original ran."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: Temperature | None = None
    max_tokens: TokenCount | None = None
    top_p: TopP | None = None

    def given(self) -> dict[str, Any]:
        return {key: value for key, value in self.model_dump().items() if value is not None}


class ReplayChanges(BaseModel):
    """What a replay changes: at most one of ``prompt_text`` (the whole edited system prompt)
    and ``prompt_file`` (a file of the agent's directory, read as the system prompt), a model
    ``model`` name, model ``params``, a ``commit`` (any git ref of the project: its agent runs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_text: str | None = Field(default=None, max_length=200_000)
    prompt_file: str | None = Field(default=None, max_length=500)
    model: str | None = Field(default=None, max_length=200)
    params: ReplayParams = ReplayParams()
    commit: str = Field(default="", max_length=200)

    @field_validator("prompt_text", "prompt_file", "model", "commit", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        # A NUL is no part of a path, a ref or a name, and PostgreSQL's JSON cannot store it.
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("must not contain a NUL character")
        return value

    @field_validator("prompt_file", "model", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("commit", mode="before")
    @classmethod
    def _commit_stripped(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value


class ReplayPick(BaseModel):
    """What a replay's run stores of its replay (``RunOptions.replay``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    of: int  # the original run's id
    policy: Policy = DEFAULT_POLICY
    cases: Literal["failed"] | None = None  # "failed": the original's failed cases
    # The system prompt it ran when changed (the whole text), and where it came from: "" for
    # edited text, else the file of the agent it was read from.
    prompt: str | None = None
    prompt_file: str = ""
    prompt_before: str = ""  # the original's system prompt, when the prompt changed
    model: str = ""  # the model name when changed
    params: dict[str, float | int] = {}
    commit: str = ""  # the commit it ran when changed (resolved), and the ref asked
    commit_ref: str = ""
    # The original's values the changes replaced: {"model": ..., "temperature": ..., "commit": ...}
    before: dict[str, Any] = {}

    @property
    def prompt_lines(self) -> tuple[int, int]:
        """(lines added, lines removed) of the system prompt."""
        if self.prompt is None:
            return 0, 0
        return prompt_line_counts(self.prompt_before, self.prompt)

    def changes(self) -> list[str]:
        """What changed, one phrase each: "system prompt edited (+3 −1 lines)", "model gpt-4o
        → gpt-4o-mini", "temperature 0.2 → 0.7", "commit 1a2b3c4 → 5d6e7f8"."""
        said: list[str] = []
        if self.prompt is not None:
            added, removed = self.prompt_lines
            where = f"from {self.prompt_file}" if self.prompt_file else "edited"
            said.append(f"system prompt {where} (+{added} −{removed} lines)")
        if self.model:
            said.append(f"model {self.before.get('model') or '?'} → {self.model}")
        for key, value in self.params.items():
            said.append(f"{key.replace('_', ' ')} {_shown(self.before.get(key))} → {value}")
        if self.commit:
            said.append(f"commit {_short(self.before.get('commit'))} → {_short(self.commit)}")
        return said

    def summary(self) -> str:
        """The changes and the tool policy, as one line: "model a → b, tools: recorded-only"."""
        return ", ".join([*(self.changes() or ["no change"]), f"tools: {self.policy}"])


def _shown(value: Any) -> str:
    return "default" if value is None else str(value)


def _short(commit: Any) -> str:
    return str(commit)[:7] if commit else "none"


def prompt_line_counts(before: str, after: str) -> tuple[int, int]:
    """(lines added, lines removed) from ``before`` to ``after``."""
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return added, removed


def agent_changed(agent: Any, pick: ReplayPick) -> Any:
    """``agent`` (a ``LoadedAgent``) with the pick's system prompt, model and parameters: its
    config (what the run records: its config snapshot shows the change) and its resolved
    instructions (what the backends give the model). The commit is not applied here: it is the
    snapshot the agent was loaded from."""
    config = agent.config
    updates: dict[str, Any] = {}
    if pick.model or pick.params:
        model = config.model.model_copy(
            update={**({"name": pick.model} if pick.model else {}), **pick.params}
        )
        updates["model"] = model
    instructions = agent.instructions
    if pick.prompt is not None:
        instructions = pick.prompt
        changed = (
            Instructions.model_construct(file=pick.prompt_file)
            if pick.prompt_file
            else Instructions.model_construct(inline=pick.prompt)
        )
        changed._text = pick.prompt  # read from the snapshot by the launch, kept in the pick
        updates["instructions"] = changed
    if not updates:
        return agent
    edited = pick.prompt is not None and not pick.prompt_file
    return dataclasses.replace(
        agent,
        config=config.model_copy(update=updates),
        instructions=instructions,
        instructions_source=EDITED_PROMPT_SOURCE if edited else agent.instructions_source,
    )


def model_before(agent: Any) -> dict[str, Any]:
    """The agent's model name and parameters, as a pick's ``before`` keeps them."""
    model = agent.config.model
    return {"model": model.name, **{key: getattr(model, key) for key in PARAMS}}

"""What-if replay: a recorded case runs again while its tools answer from the recording.

A replay run gives its backend a :class:`ToolReplay`: the tool calls each turn of each case
made in the original run (``recorded(case_index) -> [[call, ...] per turn]``, a call being a
mapping with ``name``, ``args``, ``result``, ``error``) and a policy. The backend's session
takes the case's :class:`CaseReplay` when it is made for a case, starts a turn on each ``send``
and asks it before running a tool (``answer``):

- a call whose tool and arguments equal a recorded call of the same turn (the first not yet
  used) gets that call's recorded result or error, without running the tool: a :class:`Replayed`;
- any other call follows the policy: ``recorded-only`` -> a :class:`Refused` (the call fails
  with an error naming it and what the turn recorded); ``recorded-then-live`` -> None (the
  tool runs); ``live`` never answers from the recording (every tool runs).

Tools are the same tool across backends whatever prefix a backend gives their names
(``lookup``, ``tools-lookup``, ``mcp__tools__lookup``; an MCP server's ``fin-quote`` and
``mcp__fin__quote``): :func:`tool_key`. Arguments match by JSON equality.

Django-free: the run's service reads the recording from the database and hands it in
through ``backend_for(agent, replay=...)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Policy = Literal["recorded-only", "recorded-then-live", "live"]
POLICIES: tuple[Policy, ...] = ("recorded-only", "recorded-then-live", "live")
DEFAULT_POLICY: Policy = "recorded-only"
# The group names backends give the agent's python function tools (function_tools.py).
_FUNCTION_GROUPS = frozenset({"", "tools", "python_tools"})

RecordedCall = Mapping[str, Any]
RecordedTurns = Sequence[Sequence[RecordedCall]]


@dataclass(frozen=True)
class Replayed:
    """A call answered from the recording: the recorded result, or the recorded error."""

    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Refused:
    """A call the recording has no answer for, under ``recorded-only``: it fails with
    ``error``."""

    error: str


Answer = Replayed | Refused | None


def tool_key(name: str) -> tuple[str, str]:
    """(group, tool) of a called tool's name, the same for every backend's spelling; the
    function tools' group is ``""``."""
    if name.startswith("mcp__"):
        group, _, tool = name[5:].partition("__")
    elif "-" in name:
        group, _, tool = name.partition("-")
    elif "." in name:
        group, _, tool = name.partition(".")
    else:
        group, tool = "", name
    return ("" if group in _FUNCTION_GROUPS else group), tool


def _canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def call_text(name: str, args: Any) -> str:
    """``name({"a": 1})``, cut to a readable length."""
    text = f"{name}({_canonical(args or {})})"
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class CaseReplay:
    """One case's recording, turn by turn, as a session plays it."""

    turns: list[list[RecordedCall]]
    policy: Policy
    turn: int = -1
    _used: set[int] = field(default_factory=set)

    def begin_turn(self) -> None:
        """The session sends its next message (the first ``send`` is turn 0)."""
        self.turn += 1
        self._used = set()

    def recorded(self) -> list[RecordedCall]:
        """This turn's recorded calls (none past the recording's last turn)."""
        if 0 <= self.turn < len(self.turns):
            return self.turns[self.turn]
        return []

    def answer(self, name: str, args: Mapping[str, Any]) -> Answer:
        """The recorded outcome of this call, a refusal, or None: run the tool."""
        if self.policy == "live":
            return None
        key, wanted = tool_key(name), _canonical(dict(args))
        for slot, call in enumerate(self.recorded()):
            if slot in self._used or tool_key(str(call.get("name", ""))) != key:
                continue
            if _canonical(dict(call.get("args") or {})) == wanted:
                self._used.add(slot)
                return Replayed(result=call.get("result"), error=call.get("error"))
        if self.policy == "recorded-then-live":
            return None
        return Refused(self._refusal(name, args))

    def _refusal(self, name: str, args: Mapping[str, Any]) -> str:
        recorded = [call_text(str(c.get("name", "")), c.get("args")) for c in self.recorded()]
        listed = "; ".join(recorded) if recorded else "no tool call"
        return (
            f"replay (recorded-only): no recorded call of turn {self.turn + 1} matches "
            f"{call_text(name, args)}; the recording has {listed}"
        )


class ToolReplay:
    """A replay run's recordings, handed to its backend: ``for_case`` per session."""

    def __init__(
        self, recorded: Callable[[int], RecordedTurns], policy: Policy = DEFAULT_POLICY
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown replay tool policy {policy!r}: one of {', '.join(POLICIES)}")
        self.policy = policy
        self._recorded = recorded

    def for_case(self, case_index: int) -> CaseReplay:
        turns = [list(turn) for turn in self._recorded(case_index)]
        return CaseReplay(turns=turns, policy=self.policy)


def replay_begin_turn(replay: CaseReplay | None) -> None:
    """Start the next turn of a session's replay, when it has one."""
    if replay is not None:
        replay.begin_turn()

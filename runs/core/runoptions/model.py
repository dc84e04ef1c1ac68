"""What a run was launched with (``Run.options``), typed: the one model every writer builds and
every reader reads.

The JSON keeps the keys runs have always stored, so a row written before this model reads the
same. A write is validated (a bad value is refused, naming the field); a read is tolerant
(``RunOptions.stored``: a value an older row holds that the model refuses reads as the field's
default). ``repeats`` is normalised here and nowhere else. The options the lists filter, sort or
count by are also columns of the run (``RunOptions.columns``), written with the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runs.core.agentconfig.limits import MAX_REPEATS
from runs.core.runoptions.replay import ReplayPick

# [index, name, multi-turn?, turns] of a selected case (a JSON list of four).
CaseEntry = tuple[int, str, bool, int]

RERUN_FAILED: Literal["failed"] = "failed"


class RerunPick(BaseModel):
    """What a re-run re-ran (its page says it): one case (``case``, ``name``) or its original's
    failed ones (``cases``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    of: int  # the original run's id
    case: int | None = None
    name: str | None = None
    cases: Literal["failed"] | None = None


class RunOptions(BaseModel):
    """A run's launch options, as ``Run.options`` stores them (read them with
    ``Run.run_options``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Cases in flight at once (the agent.yaml's ``execution.parallel_test_cases``, or the
    # launch's); None for runs that were not launched (imports).
    parallel: int | None = Field(default=None, ge=1)
    # How many times each case runs (``execution.repeats``; 1: once).
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    limit: int | None = Field(default=None, ge=1)
    case_filter: str = ""
    # The indices of the selected cases; None: not launched (an import).
    case_indices: list[int] | None = None
    # How many cases the agent.yaml had: a run of fewer is partial (runs.core.runoptions.texts).
    config_cases: int | None = Field(default=None, ge=0)
    cases: list[CaseEntry] = []
    checkout_commit: str = ""
    # The agent.yaml's path inside the run's snapshot (what a worker loads).
    agent_file: str = ""
    # About its agent.yaml, shown on the run page.
    warnings: list[str] = []
    # A re-grade: the run whose transcripts its cases grade (the case tasks read its turns).
    regrade_of: int | None = None
    # A CLI run: "<host>:<pid>:<start>" of the command running it (runs.core.owner).
    owner: str = ""
    rerun: RerunPick | None = None
    # A what-if replay (runs.services.replay): its original, tool policy and changes.
    replay: ReplayPick | None = None

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats_given(cls, value: Any) -> Any:
        """No ``repeats`` (None, an older row's missing key) is once."""
        return 1 if value is None else value

    @classmethod
    def stored(cls, data: Mapping[str, Any] | None) -> RunOptions:
        """The options a row holds, read tolerantly: a key this model does not know, or a value
        it refuses, reads as the field's default (older rows; a hand-edited one)."""
        data = dict(data) if isinstance(data, Mapping) else {}
        for _ in range(len(data) + 1):
            try:
                return cls.model_validate(data)
            except ValidationError as exc:
                bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
                if not bad & data.keys():
                    break
                data = {key: value for key, value in data.items() if key not in bad}
        return cls()

    @classmethod
    def of_agent(
        cls, agent: Any, *, indices: Sequence[int], repeats: int | None = None, **given: Any
    ) -> RunOptions:
        """The options of a run of ``agent``'s (a ``LoadedAgent``'s) cases of ``indices``, at
        its parallelism: ``cases`` lets the run start without reading the agent again;
        ``repeats``: how many times each case runs (None: the agent.yaml's
        ``execution.repeats``); ``given``: the other options (limit, case_filter, ...)."""
        test_cases = agent.config.test_cases
        return cls(
            parallel=agent.parallel_test_cases,
            repeats=repeats or agent.config.execution.repeats,
            case_indices=list(indices),
            config_cases=len(test_cases),
            cases=[
                (
                    i,
                    test_cases[i].name or "",
                    test_cases[i].is_multi_turn,
                    len(test_cases[i].as_turns()),
                )
                for i in indices
            ],
            **given,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON ``Run.options`` stores: the keys given (an import stores none)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def columns(self) -> dict[str, Any]:
        """The run's columns that hold options (the lists read them without the JSON)."""
        return {
            "repeats": self.repeats,
            "case_limit": self.limit,
            "case_filter": self.case_filter,
            "config_cases": self.config_cases,
        }

    def fields(self) -> dict[str, Any]:
        """Every field of a Run these options are written to: its JSON and its columns."""
        return {"options": self.to_json(), **self.columns()}

    @property
    def total_cases(self) -> int:
        """Case rows of the run: a row per repetition of each selected case."""
        return len(self.cases) * self.repeats

    @property
    def total_turns(self) -> int:
        return sum(turns for *_, turns in self.cases) * self.repeats

"""Problems found while loading an agent.yaml, reported all at once.

A user fixing a config wants every mistake in one pass, each pointing at the file, the test case,
the turn and the field, so ``ConfigError`` carries a list of ``ConfigProblem`` instead of the
first failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake: where it is (file, test case, turn, dotted field path) and a one-line cause.

    ``test_case`` is the case's name, or ``#<index>`` (0-based) for an unnamed case.
    ``field_path`` is relative to the test case when there is one (``turns[2].input``), else to
    the file (``tools[1].name``); it is empty for problems about the whole file.
    """

    file: str
    test_case: str | None
    turn: int | None
    field_path: str
    message: str

    def __str__(self) -> str:
        text = self.file
        if self.test_case is not None:
            label = self.test_case if self.test_case.startswith("#") else f"'{self.test_case}'"
            text += f": test case {label}"
        if self.turn is not None:
            text += f" (turn {self.turn})"
        if self.field_path:
            text += f": {self.field_path}"
        return f"{text}: {self.message}"


class ConfigError(Exception):
    """An agent.yaml (or its test cases file) could not be loaded; ``problems`` lists them all."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__(self._summary())

    def _summary(self) -> str:
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the agent configuration"
        return "\n".join([head + ":", *(f"  {p}" for p in self.problems)])

    def lines(self) -> list[str]:
        """Every problem as one line, in the order found."""
        return [str(p) for p in self.problems]

"""Per-turn progress in the terminal: a progress bar on a TTY, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

from runs.core.engine.events import CaseEvent
from runs.core.verdicts.numbers import case_text, repetition_text, turn_text
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.summary import OutcomeCounts


class TerminalProgress:
    def __init__(
        self,
        total_turns: int,
        total_cases: int,
        stream: TextIO | None = None,
        *,
        repeats: int = 1,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total_turns = max(1, total_turns)
        self.total_cases = total_cases
        self.repeats = repeats  # each case's repetitions (counted in the totals)
        self.turns_done = 0
        self.cases_done = 0
        # The finished cases by verdict (read as the one count shape: failed never counts
        # errored ones).
        self.outcomes: Counter[str] = Counter()
        self.started = time.perf_counter()

    def __call__(self, event: CaseEvent) -> None:
        # For people: the case's name, else "case 3 of 8"; turns "turn 1 of 4" (from 1).
        label = event.case_name or case_text(event.case_index, self.total_cases // self.repeats)
        if self.repeats > 1:
            label = f"{label} ({repetition_text(event.repetition, self.repeats)})"
        if event.kind == "turn_finished" and event.turn is not None:
            self.turns_done += 1
            turn = event.turn
            mark = Outcome.of(turn.outcome).label.upper()
            line = (
                f"[{self.turns_done}/{self.total_turns}] {label} "
                f"{turn_text(turn.turn_index, event.total_turns)} {mark} "
                f"({turn.execution_time_ms} ms)"
            )
            self._show(line)
        elif event.kind == "case_finished" and event.result is not None:
            self.cases_done += 1
            outcome = Outcome.of(event.result.outcome)
            self.outcomes[outcome.value] += 1
            if self.tty:
                self._show("")
            else:
                verdict = outcome.label if outcome is Outcome.PASSED else outcome.label.upper()
                case = f"case {event.case_name}" if event.case_name else label
                self.stream.write(f"{case}: {verdict}\n")

    def _show(self, line: str) -> None:
        if not self.tty:
            self.stream.write(line + "\n")
            return
        width = 30
        filled = int(width * self.turns_done / self.total_turns)
        bar = "#" * filled + "-" * (width - filled)
        elapsed = time.perf_counter() - self.started
        status = (
            f"\r[{bar}] {self.turns_done}/{self.total_turns} turns · "
            f"{self.cases_done}/{self.total_cases} cases · {self._bad_text()}{elapsed:.1f}s"
        )
        self.stream.write(status.ljust(100))
        self.stream.flush()

    def _bad_text(self) -> str:
        """ "2 failed · 1 errored · " (failed always, errored and not graded when some)."""
        cases = OutcomeCounts.tallied(self.outcomes.items())
        parts = [f"{cases.failed} {Outcome.FAILED.label}"]
        parts += [f"{n} {o.label}" for o, n in ((Outcome.ERROR, cases.error),
                  (Outcome.NOT_GRADED, cases.not_graded)) if n]  # fmt: skip
        return " · ".join(parts) + " · "

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")

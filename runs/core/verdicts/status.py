"""Why a run has its status, in words: "failed: 4 cases could not be graded (judge returned
invalid JSON); none failed".

A run is ``failed`` as soon as one of its cases did not pass — including a case that could not
be graded (``RunSummary.run_status``) — so a run at a 100 % pass rate can be failed. The run
page says why beside the status, each part linked to the case filter that lists those cases,
and the lists say the same in a chip's title; all of them read it from here, from the counts
stored with the run (and, on the run page, the most common error of those cases).

Django-free: the caller gives the counts and the causes; ``StatusPart.query`` is the run page's
case filter (``outcome=not_graded``) that the page turns into a link.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runs.core.verdicts.outcomes import Outcome, RunState
from runs.core.verdicts.summary import OutcomeCounts

# A cause (an error's first line) is cut to this many characters.
CAUSE_CHARS = 100

# The case filters of the run page (``?outcome=``, ``?failures=1``) a reason links to.
FAILURES_QUERY = f"outcome={Outcome.FAILED.value}"  # failed only: errored ones apart
ERROR_QUERY = f"outcome={Outcome.ERROR.value}"
NOT_GRADED_QUERY = f"outcome={Outcome.NOT_GRADED.value}"


def counters_of(run: Any) -> OutcomeCounts:
    """A run's cases by verdict from its counter columns (``total_cases``, ``cases_done``,
    ``passed_cases``, ``failed_cases``, ``errored_cases``, ``not_graded_cases``,
    ``cancelled_cases``): a Run, or a list's row of them; no query. The cases not done are
    pending; a done case none of the columns counts is skipped (there is none but by a bug)."""
    counts = OutcomeCounts(
        total=run.total_cases,
        passed=run.passed_cases,
        failed=run.failed_cases,
        error=run.errored_cases,
        not_graded=run.not_graded_cases,
        cancelled=run.cancelled_cases,
        pending=max(0, run.total_cases - run.cases_done),
    )
    counts.skipped = max(0, counts.total - counts.sum)
    return counts


@dataclass(frozen=True)
class StatusPart:
    """One clause of a reason ("4 cases could not be graded"), its cause when known, and the
    run page's case filter that lists those cases ("" for none)."""

    text: str
    cause: str = ""
    query: str = ""
    outcome: str = ""  # the outcome it is about (its colour), "" for none

    def __str__(self) -> str:
        return f"{self.text} ({self.cause})" if self.cause else self.text


@dataclass(frozen=True)
class StatusReason:
    """Why a run has ``status``: its parts, and ``look``, how its status is drawn (the CSS
    suffix of its chip and progress bar): the status itself, but for a run failed only by
    cases that could not be graded (``not_graded``: amber, not the red of failing tests) or
    that were cancelled (``cancelled``)."""

    status: str
    parts: tuple[StatusPart, ...]
    look: str

    @property
    def chip(self) -> str:
        """The class of its status chip (``chip-not_graded`` for a run failed only by cases
        that could not be graded, ...)."""
        return f"chip-{self.look}"

    @property
    def text(self) -> str:
        """The reason without the status: "4 cases could not be graded; none failed"."""
        return "; ".join(str(part) for part in self.parts)

    @property
    def sentence(self) -> str:
        """The status and its reason: "failed: 4 cases could not be graded; none failed"."""
        return f"{self.status}: {self.text}" if self.parts else self.status

    def __str__(self) -> str:
        return self.sentence


def run_status_reason(
    *,
    status: str,
    counts: OutcomeCounts,
    run_error: str = "",
    not_graded_cause: str = "",
    error_cause: str = "",
) -> StatusReason:
    """Why a run with ``counts`` has ``status``; ``*_cause``: the most common error of its
    not-graded and errored cases (``most_common_cause``), said beside their count."""
    parts = _count_parts(
        counts, not_graded_cause, error_cause, cancelled=status != RunState.CANCELLED
    )
    if status == RunState.PASSED:
        return StatusReason(status, (_all_passed(counts),), Outcome.PASSED.value)
    if RunState(status).is_active:
        progress = StatusPart(f"{counts.total - counts.pending} of {_cases(counts.total)} done")
        return StatusReason(status, (progress, *parts), status)
    if status == RunState.CANCELLED:
        stopped = StatusPart(
            f"cancelled after {counts.total - counts.cancelled - counts.pending} of "
            f"{_cases(counts.total)} had run"
        )
        return StatusReason(status, (stopped, *parts), Outcome.CANCELLED.value)
    if status == RunState.ERROR and not counts.error and run_error:
        return StatusReason(status, (StatusPart(_first_line(run_error)),), Outcome.ERROR.value)
    if status == RunState.ERROR:
        return StatusReason(status, tuple(parts), Outcome.ERROR.value)
    return _failed(status, counts, parts)


def _failed(status: str, counts: OutcomeCounts, parts: list[StatusPart]) -> StatusReason:
    """A failed run: the cases that did not pass, worst first. Failed or errored cases make it
    look failed; else it failed only because some cases could not be graded (or were
    cancelled): it looks not graded, and says that none failed."""
    if counts.failed or counts.error:
        return StatusReason(status, tuple(parts), Outcome.FAILED.value)
    if not parts:
        what = "no case ran" if not counts.total else f"not every one of {_cases(counts.total)}"
        return StatusReason(status, (StatusPart(what + " passed"),), Outcome.FAILED.value)
    none_failed = StatusPart("none failed")
    look = Outcome.NOT_GRADED.value if counts.not_graded else Outcome.CANCELLED.value
    return StatusReason(status, (*parts, none_failed), look)


def _count_parts(
    counts: OutcomeCounts, not_graded_cause: str, error_cause: str, *, cancelled: bool
) -> list[StatusPart]:
    parts = []
    if counts.failed:
        parts.append(StatusPart(_were(counts.failed, Outcome.FAILED.label), query=FAILURES_QUERY,
                                outcome=Outcome.FAILED.value))  # fmt: skip
    if counts.error:
        parts.append(
            StatusPart(
                _were(counts.error, Outcome.ERROR.label),
                _cut(error_cause),
                ERROR_QUERY,
                Outcome.ERROR.value,
            )
        )
    if counts.not_graded:
        parts.append(
            StatusPart(
                f"{_cases(counts.not_graded)} could not be graded",
                _cut(not_graded_cause),
                NOT_GRADED_QUERY,
                Outcome.NOT_GRADED.value,
            )
        )
    if counts.cancelled and cancelled:
        parts.append(StatusPart(_were(counts.cancelled, Outcome.CANCELLED.label)))
    return parts


def _all_passed(counts: OutcomeCounts) -> StatusPart:
    if counts.total == 1:
        return StatusPart("its one case passed")
    return StatusPart(f"all {_cases(counts.total)} passed")


def _were(count: int, verb: str) -> str:
    return f"{_cases(count)} {verb}"


def _cases(count: int) -> str:
    return f"{count} case{'' if count == 1 else 's'}"


def _first_line(text: str) -> str:
    return _cut(text.strip().split("\n", 1)[0])


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"


def most_common_cause(errors: Iterable[str | None]) -> str:
    """The most common of ``errors`` (their first lines, less a ``[turn 2]`` prefix), "" for
    none; ties go to the first seen."""
    seen: dict[str, int] = {}
    for error in errors:
        line = _first_line(error or "")
        if line.startswith("[") and "] " in line:
            line = line.split("] ", 1)[1]
        if line:
            seen[line] = seen.get(line, 0) + 1
    return max(seen, key=seen.__getitem__) if seen else ""

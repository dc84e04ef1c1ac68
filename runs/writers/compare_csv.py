"""A compare as CSV: one row per case and run (per repetition, for a repeated run), written
line by line as the rows come, so a compare of thousands of cases is never held whole.

Columns: the case (its stored index, 0-based as in the API, and its name), the run (id, commit,
its commit's subject), the repetition (0 without repeats), the case's verdict and its verdict per
kind (``verdict:<kind>``, empty when the case had no metric of that kind), its turn count and
execution time, then the case's score of each chosen metric (``score:<metric>``: the mean of its
turns' stored scores, as the compare page's, to 6 decimals; empty when none scored). A free text a
spreadsheet would read as a formula (``=...``) starts with a ``'``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

FIXED_COLUMNS = (
    "case_index",
    "case_name",
    "run_id",
    "commit",
    "commit_subject",
    "repetition",
    "outcome",
)
COUNT_COLUMNS = ("turns", "execution_time_ms")
LINES_PER_CHUNK = 500  # of the streamed response
SCORE_DECIMALS = 6  # a mean's float noise (0.10000000000000002) left out
# What a spreadsheet reads as the start of a formula (CSV injection).
FORMULA_STARTS = frozenset("=+-@\t\r")


@dataclass(frozen=True)
class CsvRun:
    id: int
    commit: str
    subject: str


@dataclass(frozen=True)
class CsvCase:
    """One row: a case (one repetition of it) of one run."""

    index: int
    name: str
    run: CsvRun
    repetition: int
    outcome: str
    kinds: dict[str, str]
    turns: int
    execution_time_ms: int
    scores: dict[str, float] = field(default_factory=dict)


def csv_header(kinds: Sequence[str], metrics: Sequence[str]) -> list[str]:
    return [
        *FIXED_COLUMNS,
        *(f"verdict:{kind}" for kind in kinds),
        *COUNT_COLUMNS,
        *(f"score:{metric}" for metric in metrics),
    ]


def csv_row(case: CsvCase, kinds: Sequence[str], metrics: Sequence[str]) -> list[str | int]:
    scores = case.scores
    return [
        case.index,
        safe_text(case.name),
        case.run.id,
        case.run.commit,
        safe_text(case.run.subject),
        case.repetition,
        case.outcome,
        *(case.kinds.get(kind, "") for kind in kinds),
        case.turns,
        case.execution_time_ms,
        *(
            repr(round(scores[metric], SCORE_DECIMALS)) if metric in scores else ""
            for metric in metrics
        ),
    ]


def csv_chunks(
    cases: Iterable[CsvCase], kinds: Sequence[str], metrics: Sequence[str]
) -> Iterator[str]:
    """The header line, then the cases' lines as they come, LINES_PER_CHUNK at a time."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([safe_text(name) for name in csv_header(kinds, metrics)])
    for written, case in enumerate(cases, 1):
        writer.writerow(csv_row(case, kinds, metrics))
        if written % LINES_PER_CHUNK == 0:
            yield _taken(buffer)
    yield _taken(buffer)


def _taken(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def safe_text(text: str) -> str:
    """A free text (a case name, a commit subject, a metric name) that a spreadsheet will not
    read as a formula: one starting with = + - @ or a control character gets a ' before it."""
    return f"'{text}" if text[:1] in FORMULA_STARTS else text

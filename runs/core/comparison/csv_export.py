"""A compare as CSV: one row per case and run (per repetition, for a repeated run), written
line by line as the rows come, so a compare of thousands of cases is never held whole.

Columns: the case (its stored index, 0-based as in the API, and its name), the run (id, commit,
its commit's subject), the repetition (0 without repeats), the case's verdict and its verdict per
kind (``verdict:<kind>``, empty when the case had no metric of that kind), its turn count and
execution time; its agent's tokens (``prompt_tokens``, ``completion_tokens``, ``total_tokens``:
the case's recorded usage, empty when none was recorded) and its cost in USD as a plain number
(``cost_usd``, ``agent_cost_usd``, ``judge_cost_usd``: empty when no tokens were recorded, or
when a model has no price, which ``cost_unpriced`` names; ``0`` for a free model); then the
case's score of each chosen metric (``score:<metric>``: the mean of its turns' stored scores, as
the compare page's, to 6 decimals; empty when none scored) and its change against the baseline
column (``delta:<metric>``: this row's score less the baseline run's score of the same case,
empty on the baseline's own rows and where either has no score); then what people said of the
case on that run (``reviewed``: its reviewed turns, "turn 2; turn 3", numbered from 1 as the
pages number them, "case" for a review of the case itself; ``human_verdicts`` and
``review_categories`` in the same order, ``; `` between them; ``review_notes``, each note as
"turn 2: ..." on lines of its own; reopened reviews left out). A free text a spreadsheet would
read as a formula (``=...``, even after spaces or control characters: ``"\\n=1+2"``) starts
with a ``'``.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from runs.core.pricing.prices import Cost, SplitCost

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
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens")
COST_COLUMNS = ("cost_usd", "agent_cost_usd", "judge_cost_usd", "cost_unpriced")
REVIEW_COLUMNS = ("reviewed", "human_verdicts", "review_categories", "review_notes")
LINES_PER_CHUNK = 500  # of the streamed response
SCORE_DECIMALS = 6  # a mean's float noise (0.10000000000000002) left out
COST_DECIMALS = 10  # USD: a ten-billionth of a dollar is below any token's price
# What a spreadsheet reads as the start of a formula (CSV injection), after any leading spaces
# and control characters; a tab or a carriage return first is guarded too.
FORMULA_STARTS = frozenset("=+-@")
GUARDED_FIRST = frozenset("\t\r")


@dataclass(frozen=True)
class CsvRun:
    id: int
    commit: str
    subject: str


@dataclass(frozen=True)
class CsvTokens:
    """A case's agent tokens, as recorded."""

    prompt: int
    completion: int
    total: int


@dataclass(frozen=True)
class CsvReview:
    """A person's review of a turn of the case (``turn``: its stored index), or of the case
    itself (``turn`` None)."""

    turn: int | None
    verdict: str
    category: str
    note: str


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
    tokens: CsvTokens | None = None  # None: no usage recorded
    cost: SplitCost | None = None  # None: no price table (the price file cannot be read)
    # The baseline run's scores of the same case; None on the baseline's own rows.
    baseline: dict[str, float] | None = None
    reviews: tuple[CsvReview, ...] = ()  # the case's, then its turns' by index


def csv_header(kinds: Sequence[str], metrics: Sequence[str]) -> list[str]:
    return [
        *FIXED_COLUMNS,
        *(f"verdict:{kind}" for kind in kinds),
        *COUNT_COLUMNS,
        *TOKEN_COLUMNS,
        *COST_COLUMNS,
        *(f"score:{metric}" for metric in metrics),
        *(f"delta:{metric}" for metric in metrics),
        *REVIEW_COLUMNS,
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
        *_token_cells(case.tokens),
        *_cost_cells(case.cost),
        *(_score(scores[metric]) if metric in scores else "" for metric in metrics),
        *(_delta(case, metric) for metric in metrics),
        *_review_cells(case.reviews),
    ]


def _review_cells(reviews: Sequence[CsvReview]) -> list[str]:
    """Reviewed turns, human verdicts, categories and notes, in the same order."""
    places = [_place(review.turn) for review in reviews]
    notes = [f"{place}: {review.note}" for place, review in zip(places, reviews, strict=True)
             if review.note]  # fmt: skip
    return [
        safe_text("; ".join(places)),
        safe_text("; ".join(review.verdict or "-" for review in reviews)),
        safe_text("; ".join(review.category or "-" for review in reviews)),
        safe_text("\n".join(notes)),
    ]


def _place(turn: int | None) -> str:
    return "case" if turn is None else f"turn {turn + 1}"


def _token_cells(tokens: CsvTokens | None) -> list[str | int]:
    if tokens is None:
        return ["", "", ""]
    return [tokens.prompt, tokens.completion, tokens.total]


def _cost_cells(cost: SplitCost | None) -> list[str]:
    if cost is None:
        return ["", "", "", ""]
    parts = (cost.both, cost.agent, cost.judge)
    return [*(_usd(part) for part in parts), safe_text(", ".join(cost.both.unpriced))]


def _usd(cost: Cost) -> str:
    """A known cost as a plain number of dollars ("0.0000182", "0" for a free model); empty
    when nothing was counted or a model has no price."""
    if not cost.known:
        return ""
    return f"{cost.usd:.{COST_DECIMALS}f}".rstrip("0").rstrip(".")


def _score(score: float) -> str:
    return repr(round(score, SCORE_DECIMALS) + 0.0)  # + 0.0: never "-0.0"


def _delta(case: CsvCase, metric: str) -> str:
    base = case.baseline.get(metric) if case.baseline is not None else None
    score = case.scores.get(metric)
    return "" if base is None or score is None else _score(score - base)


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
    read as a formula gets a ' before it: one whose first character that is neither a space
    nor a control (or other invisible) character is = + - or @ (``"=1+2"``, ``"\\n=1+2"``,
    ``" \\t@x"``), and one that starts with a tab or a carriage return."""
    if text[:1] in GUARDED_FIRST:
        return f"'{text}"
    first = next((char for char in text if not _invisible(char)), "")
    return f"'{text}" if first in FORMULA_STARTS else text


def _invisible(char: str) -> bool:
    """Whitespace, or a control, format or unassigned character (Unicode category C*)."""
    return char.isspace() or unicodedata.category(char).startswith("C")

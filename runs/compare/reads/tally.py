"""A compare of finished runs counted by the database instead of aligned in Python: what the
compare page shows when every run ended with its compare columns stored
(``runs.selectors.compare_store``) and none repeats its cases, with every row kept in the runs'
order (no ``show``, ``sort``, metric or search: those read every row, as before).

- Each run against the run it is compared with: one query tallies the keys of the two by their
  pair of verdict digests (a key absent from one: NULL), from the index ``case_compare_key``
  alone; each distinct pair is decided once with the matrix's rules
  (``runs.core.comparison.pairs``) and counted as many times as it occurs: the run's regressions,
  fixes and changed cases, overall and per kind, its cells, its tool verdicts.
- The rows: how many each run adds to the runs before it (one query per run), then the rows of
  the slice asked (``PagedRows``): the keys of the slice, then those cases in every run with
  their stored turn verdicts (two queries), decided as ``build_matrix`` decides them.
- The headline's agent and judge time and judge cost: the values stored with each run.

The tallies, the row counts and the digests' contents are kept per process (a finished run's
rows no longer change), keyed by the runs' uids and end times; the first view of a pair of
100,000-case runs costs a few hundred milliseconds more.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from django.db import connection
from django.db.models import Exists, OuterRef, TextField
from django.db.models.functions import Cast

from runs.compare.reads.comparison import (
    Baseline,
    Comparison,
    Headline,
    compare_runs,
    runs_compared,
    runs_in_time_order,
)
from runs.core.comparison.matrix import (
    CaseData,
    Matrix,
    Row,
    compared_with,
    older_than_compared,
)
from runs.core.comparison.pairs import PairCounts, cells_tally, matrix_rows, pair_counts
from runs.core.verdicts.numbers import pass_rate_of
from runs.core.verdicts.summary import OutcomeCounts
from runs.models import CaseRow, Run
from runs.selectors.compare_cases import KindsCache, TurnsCache
from runs.selectors.compare_store import judge_of, stored_values
from runs.selectors.costs import run_cost
from runs.selectors.runs import run_summaries

# (digest here, digest in the run, how many keys, a case id of each; None where absent)
Pair = tuple[str | None, str | None, int, int | None, int | None]
RunKey = tuple[str, str]  # a finished run's rows as they are (``run_key``)


def comparison_tallied(
    run_ids: list[int], *, chosen: int | None, kinds: list[str], order: str
) -> tuple[Baseline, Comparison]:
    """``comparison_for``'s comparison, tallied by the database when every run can be
    (``tallied``), else aligned from the rows as ``comparison_for`` does."""
    baseline, shown = runs_compared(run_ids, chosen=chosen)
    if not all(tallied(run) for run in shown):
        return baseline, compare_runs(
            shown, baseline.run, kinds, order=order, only_significant=True
        )
    return baseline, _compare_tallied(shown, baseline.run, kinds, order)


def tallied(run: Run) -> bool:
    """A run a compare tallies: ended with its compare columns stored, no repeats."""
    return not run.is_live and run.repeats <= 1 and stored_values(run) is not None


@dataclass(frozen=True)
class _Content:
    """The verdicts behind a digest."""

    case: CaseData
    tools_passed: int
    tools_failed: int


def _compare_tallied(runs: list[Run], baseline: Run, kinds: list[str], order: str) -> Comparison:
    runs, timeline_note = runs_in_time_order(runs)
    ids = [run.pk for run in runs]
    by_id = {run.pk: run for run in runs}
    against = compared_with(ids, baseline.pk, order)
    backwards = older_than_compared(against, ids)
    tallies = {run_id: pair_tally(by_id[other], by_id[run_id]) for run_id, other in against.items()}
    contents = _contents([pair for pairs in tallies.values() for pair in pairs])
    selected = frozenset(kinds)
    counts = {
        run_id: pair_counts(
            [(_case(contents, p[0]), _case(contents, p[1]), p[2]) for p in tallies[run_id]],
            (other, run_id),
            selected,
            timeline=ids,
            before_first=run_id not in backwards,
        )
        for run_id, other in against.items()
    }
    cases = _run_cases(ids, against, tallies, contents)
    rows = PagedRows(ids, row_counts(runs, cases), selected, against)
    matrix = Matrix(ids, baseline.pk, rows, against=against, backwards=backwards)
    matrix.by_kind = {
        kind: {run_id: found.by_kind[kind] for run_id, found in counts.items() if found.by_kind}
        for kind in next(iter(counts.values())).by_kind or {}
    }
    summaries = run_summaries(runs)
    headlines = [
        _headline(run, summaries[run.pk], kinds, counts.get(run.pk), cases[run.pk]) for run in runs
    ]
    return Comparison(
        runs=runs,
        baseline=baseline,
        kinds=kinds,
        matrix=matrix,
        headlines=headlines,
        order=order,
        timeline_note=timeline_note,
    )


def _case(contents: dict[str, _Content], digest: str | None) -> CaseData | None:
    return contents[digest].case if digest is not None else None


def _run_cases(
    ids: list[int],
    against: dict[int, int],
    tallies: dict[int, list[Pair]],
    contents: dict[str, _Content],
) -> dict[int, list[tuple[_Content, int]]]:
    """Per run, its cases as (the verdicts behind a digest, how many cases have it), from a
    tally it is in (as the run, else as the compared run)."""
    found: dict[int, list[tuple[_Content, int]]] = {}
    for run_id, other in against.items():
        if run_id not in found:
            found[run_id] = _side(tallies[run_id], 1, contents)
        if other not in found:
            found[other] = _side(tallies[run_id], 0, contents)
    return {run_id: found.get(run_id, []) for run_id in ids}


def _side(
    pairs: list[Pair], side: int, contents: dict[str, _Content]
) -> list[tuple[_Content, int]]:
    counted: dict[str, int] = {}
    for pair in pairs:
        digest = pair[0] if side == 0 else pair[1]
        if digest is not None:
            counted[digest] = counted.get(digest, 0) + pair[2]
    return [(contents[digest], count) for digest, count in counted.items()]


def _headline(
    run: Run,
    summary: Any,
    kinds: list[str],
    counts: PairCounts | None,
    cases: list[tuple[_Content, int]],
) -> Headline:
    values = stored_values(run) or {}
    judge_ms, judge_cost = judge_of(values.get("judge", {}), kinds)
    passed = sum(content.tools_passed * n for content, n in cases)
    failed = sum(content.tools_failed * n for content, n in cases)
    selected = frozenset(kinds)
    cells = cells_tally(((content.case, n) for content, n in cases), selected)
    priced = run_cost(run=run)
    return Headline(
        run=run,
        summary=summary,
        kind_pass_rate=OutcomeCounts.tallied(cells).pass_rate if kinds else None,
        tool_pass_rate=pass_rate_of(passed, passed + failed),
        tokens=run.total_tokens or None,
        agent_ms=values.get("agent_ms", 0),
        judge_ms=judge_ms,
        cost_usd=judge_cost,
        cost=priced.cost,
        cost_error=priced.error,
        metrics=[metric for metric in summary.metrics if not kinds or metric.kind in kinds],
        regressions=counts.regressions if counts else 0,
        fixes=counts.fixes if counts else 0,
        changed=counts.changed if counts else 0,
    )


# --- the tallies, kept per process ----------------------------------------------------------

_TALLY = """
SELECT a.verdicts_digest, b.verdicts_digest, COUNT(*), MIN(a.id), MIN(b.id)
FROM runs_caseresult a
LEFT JOIN runs_caseresult b ON b.run_id = %s AND b.compare_key = a.compare_key
WHERE a.run_id = %s
GROUP BY a.verdicts_digest, b.verdicts_digest
UNION ALL
SELECT NULL, b.verdicts_digest, COUNT(*), NULL, MIN(b.id)
FROM runs_caseresult b
WHERE b.run_id = %s AND NOT EXISTS (
    SELECT 1 FROM runs_caseresult a WHERE a.run_id = %s AND a.compare_key = b.compare_key
)
GROUP BY b.verdicts_digest
"""

KEPT = 512  # entries of each cache below
_lock = threading.Lock()
_tallies: dict[tuple[RunKey, RunKey], list[Pair]] = {}
_row_counts: dict[tuple[RunKey, ...], list[int]] = {}
_digests: dict[str, _Content] = {}


def _kept[K, V](cache: dict[K, V], key: K, value: V) -> V:
    with _lock:
        if len(cache) >= KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def run_key(run: Run) -> RunKey:
    """A finished run's rows as they are: its uid, its end, and what was stored when it ended
    (a run ended again, its rows changed, stores other counts)."""
    ended: datetime | None = run.finished_at
    counts = json.dumps(run.list_counts, sort_keys=True, default=str)
    stamp = hashlib.md5(counts.encode(), usedforsecurity=False).hexdigest()
    return (str(run.uid), f"{ended.isoformat() if ended else ''} {stamp}")


def pair_tally(other: Run, run: Run) -> list[Pair]:
    """The keys of ``other`` and ``run`` by (digest in ``other``, digest in ``run``): one query
    over the index ``case_compare_key``, kept per process."""
    key = (run_key(other), run_key(run))
    found = _tallies.get(key)
    if found is not None:
        return found
    with connection.cursor() as cursor:
        cursor.execute(_TALLY, [run.pk, other.pk, run.pk, other.pk])
        pairs = [(a, b, int(n), ia, ib) for a, b, n, ia, ib in cursor.fetchall()]
    return _kept(_tallies, key, pairs)


def row_counts(runs: list[Run], cases: dict[int, list[tuple[_Content, int]]]) -> list[int]:
    """How many rows each run adds to the runs before it (columns order): its keys that none of
    them has (one query per run but the first, kept per process)."""
    key = tuple(run_key(run) for run in runs)
    found = _row_counts.get(key)
    if found is not None:
        return found
    ids = [run.pk for run in runs]
    counts = [sum(n for _, n in cases[ids[0]])]
    counts += [
        _added(ids[:position], run_id).count() for position, run_id in enumerate(ids) if position
    ]
    return _kept(_row_counts, key, counts)


def _added(before: list[int], run_id: int) -> Any:
    """The case rows of ``run_id`` whose key none of the runs ``before`` has."""
    cases = CaseRow.objects.filter(run_id=run_id)
    if not before:
        return cases
    earlier = CaseRow.objects.filter(run_id__in=before, compare_key=OuterRef("compare_key"))
    return cases.filter(~Exists(earlier))


def _contents(pairs: list[Pair]) -> dict[str, _Content]:
    """The verdicts behind the digests of ``pairs`` (one query for those not kept, none when
    every one is)."""
    found = dict(_digests)
    missing = {
        digest: case_id
        for pair in pairs
        for digest, case_id in ((pair[0], pair[3]), (pair[1], pair[4]))
        if digest is not None and case_id is not None and digest not in found
    }
    if not missing:
        return found
    rows = (
        CaseRow.objects.filter(pk__in=list(missing.values()))
        .annotate(kinds_text=Cast("kind_outcomes", TextField()))
        .values_list("verdicts_digest", "status", "outcome", "kinds_text", "verdicts")
    )
    parsed = TurnsCache()
    for digest, status, outcome, kinds_text, verdicts in rows:
        if digest is None:
            continue  # not stored: the run would not be tallied
        turns = parsed(verdicts)
        case = CaseData(0, 0, "", status, outcome, parsed.kinds(kinds_text), turns.turns)
        found[digest] = _kept(
            _digests, digest, _Content(case, turns.tools_passed, turns.tools_failed)
        )
    return found


# --- the rows of a slice --------------------------------------------------------------------


class PagedRows(Sequence[Row]):
    """A tallied compare's rows in the runs' order, read per slice: the rows each run adds
    (``counts``: how many, in the columns' order) follow those of the runs before it, by that
    run's case index."""

    def __init__(
        self,
        run_ids: list[int],
        counts: list[int],
        selected: frozenset[str],
        against: dict[int, int],
    ) -> None:
        self.run_ids = run_ids
        self.counts = counts
        self.selected = selected
        self.against = against

    def __len__(self) -> int:
        return sum(self.counts)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            return self.rows(start, stop)[::step]
        position = index + len(self) if index < 0 else index
        found = self.rows(position, position + 1) if 0 <= position < len(self) else []
        if not found:
            raise IndexError(index)
        return found[0]

    def __iter__(self) -> Iterator[Row]:
        for start in range(0, len(self), 1000):
            yield from self.rows(start, start + 1000)

    def rows(self, start: int, stop: int) -> list[Row]:
        """The rows ``start`` to ``stop`` (two queries, one more per run whose rows it
        reaches)."""
        keys = self.keys(start, stop)
        if not keys:
            return []
        by_run: dict[int, dict[str, CaseData]] = {run_id: {} for run_id in self.run_ids}
        parsed = TurnsCache()
        kinds = KindsCache()
        found = (
            CaseRow.objects.filter(run_id__in=self.run_ids, compare_key__in=keys)
            .annotate(kinds_text=Cast("kind_outcomes", TextField()))
            .values_list(
                "run_id",
                "compare_key",
                "id",
                "index",
                "name",
                "status",
                "outcome",
                "kinds_text",
                "verdicts",
            )
        )
        for run_id, key, case_id, index, name, status, outcome, kinds_text, verdicts in found:
            turns = parsed(verdicts).turns
            case = CaseData(case_id, index, name, status, outcome, kinds(kinds_text), turns)
            by_run[run_id][key or ""] = case
        return matrix_rows(by_run, self.selected, against=self.against, timeline=self.run_ids)

    def keys(self, start: int, stop: int) -> list[str]:
        """The keys of the rows ``start`` to ``stop``: each run's added keys by case index."""
        keys: list[str] = []
        first = 0
        for position, (run_id, count) in enumerate(zip(self.run_ids, self.counts, strict=True)):
            low, high = max(start - first, 0), min(stop - first, count)
            if low < high:
                added = _added(self.run_ids[:position], run_id).order_by("index")
                keys += added.values_list("compare_key", flat=True)[low:high]
            first += count
        return keys

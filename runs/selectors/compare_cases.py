"""A compare's cases read as plain data (``runs.core.comparison.matrix.CaseData``): every case of
the runs with its turns' verdicts, a fixed number of queries whatever the runs' size."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import StringAgg, Sum, TextField, Value
from django.db.models.functions import Cast, Concat

from runs.core.comparison.matrix import CaseData, TurnData
from runs.core.comparison.repeats import repetitions_merged
from runs.core.verdicts.kinds import TOOLS_KIND
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.repeats import repeat_stats
from runs.models import CaseRow, TurnRow


@dataclass
class RunTotals:
    """Sums over a run's turn rows, read with them."""

    agent_ms: int = 0
    tools_passed: int = 0
    tools_failed: int = 0


# One turn of the text ``case_rows`` reads per case: "index|outcome|verdicts by kind (JSON)".
TURN_LINE = Concat(
    Cast("index", TextField()),
    Value("|"),
    "outcome",
    Value("|"),
    Cast("kind_outcomes", TextField()),
    output_field=TextField(),
)
TURNS_SEPARATOR = "\n"  # JSON text holds no raw line break


def case_rows(
    run_ids: list[int], *, stored_agent_ms: dict[int, int] | None = None
) -> tuple[dict[int, list[CaseData]], dict[int, RunTotals], dict[int, tuple[int, int]]]:
    """Every case of the runs with its turns, as plain data, the turns' sums and, for a
    repeated run's merged cases, (passed, graded) of their repetitions by the case's id (2
    queries; 1 with ``stored_agent_ms``: every run ended with its compare columns stored,
    ``runs.selectors.compare_store``, and these are its agent times).

    The turns come as one line per case: the case row's stored verdicts, else the database
    joins each case's turn verdicts into one text (read from the covering index
    ``turn_verdicts_cover``, not the wide turn rows). The cases of a run share a handful of
    distinct texts, each parsed once into turns shared by every case that has it.
    """
    parsed = TurnsCache()
    if stored_agent_ms is None:
        turns_of, totals = _turns_read(run_ids, parsed)
    else:
        turns_of, totals = {}, defaultdict(RunTotals)
        for run_id, agent_ms in stored_agent_ms.items():
            totals[run_id].agent_ms = agent_ms
    cases: dict[int, list[CaseData]] = defaultdict(list)
    repeated: dict[tuple[int, int], list[CaseData]] = {}
    kinds_of = parsed.kinds
    rows = (
        CaseRow.objects.filter(run_id__in=run_ids)
        .order_by("run_id", "index", "repetition")
        .annotate(kinds_text=Cast("kind_outcomes", TextField()))
        .values_list(
            "run_id",
            "id",
            "index",
            "repetition",
            "name",
            "status",
            "outcome",
            "kinds_text",
            "verdicts" if stored_agent_ms is not None else "kinds_text",
        )
    )
    for run_id, case_id, index, repetition, name, status, outcome, kinds_text, text in rows:
        if stored_agent_ms is not None:
            found = parsed(text)
            turns_of[case_id] = found.turns
            totals[run_id].tools_passed += found.tools_passed
            totals[run_id].tools_failed += found.tools_failed
        # The columns in CaseData's order: id, index, name, status, outcome, kinds, turns.
        facts = (case_id, index, name, status, outcome)
        case = CaseData(*facts, kinds_of(kinds_text), turns_of.get(case_id, ()))
        if repetition == 0:
            cases[run_id].append(case)
        else:  # a repeated run: its case's repetitions are merged below
            repeated.setdefault((run_id, index), []).append(case)
    counts = _merge_repetitions(cases, repeated) if repeated else {}
    return cases, totals, counts


def _turns_read(
    run_ids: list[int], parsed: TurnsCache
) -> tuple[dict[int, tuple[TurnData, ...]], dict[int, RunTotals]]:
    """Each case's turns (by case id) and each run's sums, from the turn rows (1 query)."""
    turns_of: dict[int, tuple[TurnData, ...]] = {}
    totals: dict[int, RunTotals] = defaultdict(RunTotals)
    for run_id, case_id, text, agent_ms in (
        TurnRow.objects.filter(run_id__in=run_ids)
        .order_by()
        .values("run_id", "case_id")
        .annotate(
            text=StringAgg(TURN_LINE, Value(TURNS_SEPARATOR)), agent_ms=Sum("execution_time_ms")
        )
        .values_list("run_id", "case_id", "text", "agent_ms")
    ):
        found = parsed(text)
        turns_of[case_id] = found.turns
        sums = totals[run_id]
        sums.agent_ms += agent_ms or 0
        sums.tools_passed += found.tools_passed
        sums.tools_failed += found.tools_failed
    return turns_of, totals


def _merge_repetitions(
    cases: dict[int, list[CaseData]], repeated: dict[tuple[int, int], list[CaseData]]
) -> dict[int, tuple[int, int]]:
    """A repeated run's cases, each one case of the comparison with its verdicts merged over
    its repetitions (``runs.core.verdicts.repeats.repetitions_merged``); (passed, graded) of each
    merged case's repetitions, by its id."""

    counts = {}
    for run_id, listed in cases.items():
        merged = []
        for case in listed:
            group = [case, *repeated.get((run_id, case.index), ())]
            if len(group) > 1:
                stats = repeat_stats(member.outcome for member in group)
                counts[case.case_id] = (stats.passed, stats.graded)
                case = repetitions_merged(group)
            merged.append(case)
        cases[run_id] = merged
    return counts


def case_turns(run_ids: list[int]) -> dict[int, list[CaseData]]:
    """Run id -> its cases that have turns, with their turns' verdicts (the cases' own state
    and verdict left out): for counting changes between runs along a series (1 query: one
    text per case, as ``case_rows`` reads them, with the case's name and index)."""
    parsed = TurnsCache()
    found: dict[int, list[CaseData]] = defaultdict(list)
    for run_id, case_id, name, index, text in (
        TurnRow.objects.filter(run_id__in=run_ids)
        .order_by()
        .values("run_id", "case_id", "case__name", "case__index")
        .annotate(text=StringAgg(TURN_LINE, Value(TURNS_SEPARATOR)))
        .values_list("run_id", "case_id", "case__name", "case__index", "text")
    ):
        turns = parsed(text).turns
        found[run_id].append(CaseData(case_id, index, name, "done", "", {}, turns))
    return dict(found)


@dataclass(frozen=True)
class CaseTurns:
    """A case's turns in order, and how many of them passed and failed their tool assertions."""

    turns: tuple[TurnData, ...]
    tools_passed: int
    tools_failed: int


class TurnsCache:
    """Parses the turn texts of ``case_rows`` and the stored verdicts by kind, once per distinct
    text: a run of thousands of turns has a handful of distinct combinations, so decoding each
    row would be waste."""

    def __init__(self) -> None:
        self.seen: dict[str, CaseTurns] = {}
        self.kinds = KindsCache()

    def __call__(self, text: str | None) -> CaseTurns:
        found = self.seen.get(text or "")
        if found is None:
            found = self.seen[text or ""] = self._parse(text or "")
        return found

    def _parse(self, text: str) -> CaseTurns:
        turns = []
        for line in text.split(TURNS_SEPARATOR) if text else ():
            index, outcome, kinds = line.split("|", 2)
            turns.append(TurnData(index=int(index), outcome=outcome, kinds=self.kinds(kinds)))
        turns.sort(key=lambda turn: turn.index)
        tools = [turn.kinds[TOOLS_KIND] for turn in turns if TOOLS_KIND in turn.kinds]
        return CaseTurns(tuple(turns), tools.count(Outcome.PASSED), tools.count(Outcome.FAILED))


class KindsCache:
    """Verdicts by kind from their JSON text, each distinct text parsed once: the cases and
    turns of a compare share a handful of them."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, str]] = {}

    def __call__(self, text: str | None) -> dict[str, str]:
        if not text:
            return {}
        found = self.seen.get(text)
        if found is None:
            found = self.seen[text] = json.loads(text) or {}
        return found

"""A repeated case as one case of a comparison: its repetitions merged, verdict by verdict, by
``runs.core.verdicts.repeats.merged_outcome``."""

from __future__ import annotations

from collections.abc import Sequence

from runs.core.comparison.matrix import CaseData, TurnData
from runs.core.verdicts.repeats import merged_outcome


def repetitions_merged(cases: Sequence[CaseData]) -> CaseData:
    """A case's repetitions (in order) as one case of a comparison: the first repetition's row
    (its links), each verdict merged over them (``merged_outcome``): the case's, each turn's and
    each kind's."""
    first = cases[0]
    turns = []
    for position, turn in enumerate(first.turns):
        lines = [case.turns[position] for case in cases if len(case.turns) > position]
        kinds = {
            kind: merged_outcome([line.kinds[kind] for line in lines if kind in line.kinds])
            for kind in turn.kinds
        }
        turns.append(TurnData(turn.index, merged_outcome([line.outcome for line in lines]), kinds))
    kinds = {
        kind: merged_outcome([case.kinds[kind] for case in cases if kind in case.kinds])
        for kind in first.kinds
    }
    return CaseData(
        case_id=first.case_id,
        index=first.index,
        name=first.name,
        status=first.status,
        outcome=merged_outcome([case.outcome for case in cases]),
        kinds=kinds,
        turns=tuple(turns),
    )

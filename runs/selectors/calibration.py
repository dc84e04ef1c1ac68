"""Reads of how each metric agrees with people (``runs.core.reviewing.agreement``): per project
(optionally per metric kind) every metric its runs graded, with its agreement over the turns
people reviewed; one metric's reviewed turns side by side; the agreement of a compare's metrics.

The reviewed turns are those with a review of their own (one per turn and run, carried reviews
confirmed on a later run count on that run) that gives a verdict and was not reopened. Two
queries for a project's list, one for a metric's page or a compare, whatever the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Q

from runs.core.reviewing.agreement import Agreement, Judged, agreement_of
from runs.core.reviewing.vocabulary import HumanVerdict
from runs.core.verdicts.kinds import kind_order
from runs.core.verdicts.numbers import case_text
from runs.models import MetricRow

VERDICTS = tuple(verdict.value for verdict in HumanVerdict)


@dataclass(frozen=True)
class ReviewedTurn:
    """One reviewed turn of one metric: where it is, the metric's verdict and score, the
    person's verdict on the turn."""

    judged: Judged
    run_id: int
    case_id: int
    case_label: str
    index: int  # the turn's stored (0-based) index

    @property
    def turn_id(self) -> int:
        return self.judged.turn_id

    @property
    def number(self) -> int:
        """The turn as people count it (1-based): its anchor on the case page."""
        return self.index + 1

    @property
    def human_verdict(self) -> HumanVerdict:
        return HumanVerdict(self.judged.verdict)

    @property
    def agrees(self) -> bool | None:
        machine, human = self.judged.machine_passed, self.judged.human_passed
        return None if machine is None or human is None else machine == human


@dataclass(frozen=True)
class MetricCalibration:
    """One metric's agreement and its reviewed turns, newest run first."""

    agreement: Agreement
    turns: list[ReviewedTurn]

    @property
    def disagreeing(self) -> list[ReviewedTurn]:
        wrong = {found.turn_id for found in self.agreement.disagreements}
        return [turn for turn in self.turns if turn.turn_id in wrong]


def project_calibration(*, project_id: int, kind: str = "") -> list[Agreement]:
    """Every metric the project's runs graded (of ``kind``, when given), by kind then name,
    each with its agreement over the reviewed turns (none reviewed: an empty one). Two
    queries."""
    graded = MetricRow.objects.filter(run__project_id=project_id)
    if kind:
        graded = graded.filter(kind=kind)
    kinds: dict[str, set[str]] = {}
    for name, metric_kind in graded.values_list("metric_name", "kind").distinct():
        kinds.setdefault(name, set()).add(metric_kind)
    reviewed = _by_metric(_reviewed_rows(Q(turn__reviews__project_id=project_id), kind=kind))
    for name, rows in reviewed.items():
        kinds.setdefault(name, set()).update(row["kind"] for row in rows)
    agreements = [
        agreement_of(name, (_judged(row) for row in reviewed.get(name, [])), _sorted(found))
        for name, found in kinds.items()
    ]
    return sorted(agreements, key=lambda a: (min(map(kind_order, a.kinds), default=99), a.metric))


def metric_calibration(*, project_id: int, metric: str) -> MetricCalibration:
    """The metric's agreement and each of its reviewed turns (one query)."""
    rows = _reviewed_rows(Q(turn__reviews__project_id=project_id), metric_names=[metric])
    turns = [
        ReviewedTurn(
            judged=_judged(row),
            run_id=row["run_id"],
            case_id=row["case_id"],
            case_label=row["case_name"] or case_text(row["case_index"]),
            index=row["turn_index"],
        )
        for row in rows
    ]
    kinds = _sorted({row["kind"] for row in rows})
    return MetricCalibration(agreement_of(metric, (t.judged for t in turns), kinds), turns)


def metric_agreements(
    *, project_ids: Iterable[int], metric_names: Iterable[str]
) -> dict[str, Agreement]:
    """The agreement of each of ``metric_names`` over the reviewed turns of the projects'
    runs, for metrics with at least one reviewed turn (one query; none without a project)."""
    projects, names = sorted(set(project_ids)), sorted(set(metric_names))
    if not projects or not names:
        return {}
    rows = _reviewed_rows(Q(turn__reviews__project_id__in=projects), metric_names=names)
    return {
        name: agreement_of(name, map(_judged, found), _sorted({row["kind"] for row in found}))
        for name, found in _by_metric(rows).items()
    }


def _reviewed_rows(
    where: Q, *, kind: str = "", metric_names: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The metric rows of reviewed turns with the review's verdict and the turn's place, newest
    run first (one query: a turn has at most one review of its own)."""
    reviewed = where & Q(turn__reviews__reopened=False, turn__reviews__verdict__in=VERDICTS)
    rows = MetricRow.objects.filter(reviewed)
    if kind:
        rows = rows.filter(kind=kind)
    if metric_names:
        rows = rows.filter(metric_name__in=list(metric_names))
    found = (
        rows.order_by("-run_id", "turn__case__index", "turn__case__repetition", "turn__index")
        .values("turn_id", "run_id", "metric_name", "kind", "score", "threshold", "outcome")
        .annotate(
            verdict=F("turn__reviews__verdict"),
            case_id=F("turn__case_id"),
            case_name=F("turn__case__name"),
            case_index=F("turn__case__index"),
            turn_index=F("turn__index"),
        )
    )
    return [dict(row) for row in found]


def _by_metric(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row["metric_name"], []).append(row)
    return found


def _judged(row: dict[str, Any]) -> Judged:
    return Judged(
        turn_id=row["turn_id"],
        outcome=row["outcome"],
        verdict=row["verdict"],
        score=row["score"],
        threshold=row["threshold"],
    )


def _sorted(kinds: Iterable[str]) -> list[str]:
    return sorted(kinds, key=lambda kind: (kind_order(kind), kind))

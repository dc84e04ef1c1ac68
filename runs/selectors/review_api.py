"""Reads of the reviews API (``runs.api.reviews``): a run's reviews with the reviews its failing
turns carry from earlier runs, one turn's review state, and the turn a review request names. A
fixed number of queries each, whatever the run's size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.shortcuts import get_object_or_404

from runs.models import CaseRow, TurnRow
from runs.review_models import Review
from runs.selectors.reviews import (
    FAILURE_OUTCOMES,
    Carried,
    ReviewTally,
    carried_reviews,
    run_review_tally,
)

if TYPE_CHECKING:
    from runs.models import Run

REVIEW_RELATED = (
    "case", "turn", "category", "assignee", "created_by", "updated_by", "carried_from",
)  # fmt: skip


@dataclass(frozen=True)
class CarriedTurn:
    """A failing turn of the run and the review it carries from an earlier run."""

    turn: TurnRow
    carried: Carried


@dataclass(frozen=True)
class RunReviews:
    """The run's own reviews (of turns and of cases), by case and turn; what its failing turns
    carry from earlier runs; and its review state in counts (people's verdicts, counted)."""

    reviews: list[Review]
    carried: list[CarriedTurn]
    tally: ReviewTally


def run_review_listing(*, run: Run) -> RunReviews:
    """Everything people said about the run's turns (seven queries)."""
    reviews = sorted(
        Review.objects.filter(run=run).select_related(*REVIEW_RELATED),
        key=lambda r: (r.case.index, r.case.repetition, r.turn.index if r.turn else -1, r.pk),
    )
    failing = list(
        TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES)
        .select_related("case")
        .order_by("case__index", "case__repetition", "index")
    )
    carried = carried_reviews(run=run, turns=failing)
    return RunReviews(
        reviews=reviews,
        carried=[CarriedTurn(turn, carried[turn.pk]) for turn in failing if turn.pk in carried],
        tally=run_review_tally(run=run),
    )


def review_turn_at(*, run_id: int, case_id: int, index: int) -> TurnRow:
    """The turn at ``index`` of the run's case, with its case and run, or 404."""
    return get_object_or_404(
        TurnRow.objects.select_related("case__run").defer(
            "case__run__raw_yaml", "case__run__config_snapshot"
        ),
        run_id=run_id,
        case_id=case_id,
        index=index,
    )


def review_case_at(*, run_id: int, case_id: int) -> CaseRow:
    """The run's case, with its run, or 404."""
    return get_object_or_404(
        CaseRow.objects.select_related("run").defer("run__raw_yaml", "run__config_snapshot"),
        run_id=run_id,
        pk=case_id,
    )


def case_review_of(*, case: CaseRow) -> Review | None:
    """The case's own review (of the case itself, not of a turn), or None (one query)."""
    return (
        Review.objects.filter(case=case, turn__isnull=True).select_related(*REVIEW_RELATED).first()
    )


def turn_review_state(*, turn: TurnRow) -> tuple[Review | None, Carried | None]:
    """The turn's own review, and the review it carries from an earlier run (two queries)."""
    own = Review.objects.filter(turn=turn).select_related(*REVIEW_RELATED).first()
    carried = carried_reviews(run=turn.case.run, turns=[turn]).get(turn.pk)
    return own, carried


def review_get(*, review_id: int) -> Review:
    """One review with what its answer shows (one query)."""
    return get_object_or_404(Review.objects.select_related(*REVIEW_RELATED), pk=review_id)

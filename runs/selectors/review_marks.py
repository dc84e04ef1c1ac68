"""A run's failures as people triaged them, for the readers that mark them (the CI gate's
``--ignore-triaged``, compare's "triaged" mark, the trends' reviewed column).

A failing turn's triage is its own review when it has one (none when that was reopened: the
failure is to be triaged again), else a review carried from an earlier run that is **known**
there: the same turn, defined the same, failing the same way (``runs.selectors.reviews``). A
stale review or one about another failure never triages a turn. A fixed number of queries each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from runs.models import TurnRow
from runs.review_models import Review
from runs.selectors.reviews import FAILURE_OUTCOMES, carried_reviews, is_triaged

if TYPE_CHECKING:
    from runs.models import Run


_FAILURE_FIELDS = (
    "id", "index", "outcome", "turn_key", "definition", "failure", "case_id", "case__name",
    "case__index", "case__repetition", "case__outcome",
)  # fmt: skip
_MARK_FIELDS = (
    "turn_id", "verdict", "note", "link", "reopened", "updated_at", "category_id",
    "category__name", "updated_by__username",
)  # fmt: skip


@dataclass(frozen=True)
class TriageMark:
    """How a failing turn was triaged: its category (None: a verdict without one), the
    person's verdict and note, who and when, and the run it was reviewed on when it was
    carried from an earlier one (None: reviewed on this run)."""

    category: str | None
    verdict: str
    note: str
    link: str
    by: str
    at: datetime
    carried_from_run: int | None = None


@dataclass(frozen=True)
class Failure:
    """One failing turn of a run (failed, errored or not graded) and its triage, if any."""

    turn_id: int
    case_id: int
    case_key: str  # as compare keys its rows: the case's name, else "#<index>"
    case_index: int
    repetition: int
    turn_index: int
    outcome: str
    case_outcome: str
    mark: TriageMark | None


def run_failures(*, run: Run) -> list[Failure]:
    """Every failing turn of the run with its triage, by case and turn (three queries)."""
    turns = list(
        TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES)
        .select_related("case")
        .only(*_FAILURE_FIELDS)
        .order_by("case__index", "case__repetition", "index")
    )
    marks = turn_marks(run=run, turns=turns)
    return [
        Failure(
            turn_id=turn.pk,
            case_id=turn.case_id,
            case_key=turn.case.name or f"#{turn.case.index}",
            case_index=turn.case.index,
            repetition=turn.case.repetition,
            turn_index=turn.index,
            outcome=turn.outcome,
            case_outcome=turn.case.outcome,
            mark=marks.get(turn.pk),
        )
        for turn in turns
    ]


def turn_marks(*, run: Run, turns: Sequence[TurnRow]) -> dict[int, TriageMark]:
    """The triage of each of ``turns`` (of ``run``) that has one, by turn id (two queries)."""
    wanted = {turn.pk for turn in turns}
    reviews = (
        Review.objects.filter(run=run, turn__isnull=False)
        .select_related("category", "updated_by")
        .only(*_MARK_FIELDS)
    )  # the run's reviews, not thousands of ids in an IN list
    own = {review.turn_id: review for review in reviews if review.turn_id in wanted}
    marks = {turn_id: _mark(review) for turn_id, review in own.items() if is_triaged(review)}
    unreviewed = [turn for turn in turns if turn.pk not in own]
    for turn_id, carried in carried_reviews(run=run, turns=unreviewed).items():
        if carried.is_known:
            marks[turn_id] = _mark(carried.review, carried_from_run=carried.review.run_id)
    return marks


def marks_of_turns(
    *, turns: Sequence[TurnRow], project_of: Mapping[int, int | None]
) -> dict[int, TriageMark]:
    """The triage of each of ``turns`` that failed (of several runs: a side by side;
    ``project_of``: each run's project by run id), by turn id: none, one or two queries
    whatever the number of runs."""
    failing = [turn for turn in turns if turn.outcome in FAILURE_OUTCOMES]
    if not failing:
        return {}
    reviews = (
        Review.objects.filter(turn__in=[turn.pk for turn in failing])
        .select_related("category", "updated_by")
        .only(*_MARK_FIELDS)
    )
    own = {review.turn_id: review for review in reviews if review.turn_id is not None}
    marks = {turn_id: _mark(review) for turn_id, review in own.items() if is_triaged(review)}
    unreviewed = [turn for turn in failing if turn.pk not in own and turn.turn_key]
    newest = _newest_elsewhere(unreviewed, project_of)
    for turn in unreviewed:
        review = newest.get(turn.pk)
        if review is not None and _known(review, turn):
            marks[turn.pk] = _mark(review, carried_from_run=review.run_id)
    return marks


def _known(review: Review, turn: TurnRow) -> bool:
    """The same turn (by place), defined the same, failing the same way."""
    return (review.definition, review.failure) == (turn.definition, turn.failure)


def _newest_elsewhere(
    turns: Sequence[TurnRow], project_of: Mapping[int, int | None]
) -> dict[int, Review]:
    """For each turn (by id), the newest review of the same turn (by place) made on another
    run of its project (one query)."""
    places = {(project_of.get(turn.run_id), turn.turn_key) for turn in turns}
    places = {(project, key) for project, key in places if project is not None}
    if not places:
        return {}
    by_place: dict[tuple[int | None, str], list[Review]] = {}
    for review in (
        Review.objects.filter(
            project_id__in={project for project, _ in places},
            turn_key__in={key for _, key in places}, reopened=False,
        )
        .exclude(verdict="")
        .select_related("category", "updated_by")
        .order_by("-updated_at", "-id")
    ):  # fmt: skip
        by_place.setdefault((review.project_id, review.turn_key), []).append(review)
    found = {}
    for turn in turns:
        listed = by_place.get((project_of.get(turn.run_id), turn.turn_key), [])
        earlier = next((review for review in listed if review.run_id != turn.run_id), None)
        if earlier is not None:
            found[turn.pk] = earlier
    return found


def _mark(review: Review, carried_from_run: int | None = None) -> TriageMark:
    return TriageMark(
        category=review.category.name if review.category_id and review.category else None,
        verdict=review.verdict,
        note=review.note,
        link=review.link,
        by=review.updated_by.get_username() if review.updated_by else "",
        at=review.updated_at,
        carried_from_run=carried_from_run,
    )


def failures_triaged(failures: Iterable[Failure]) -> tuple[int, int]:
    """(failing turns, of them triaged)."""
    listed = list(failures)
    return len(listed), sum(1 for failure in listed if failure.mark is not None)

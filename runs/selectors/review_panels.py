"""Reads of the review panels (a case's failing turns and the case itself, on the run page's
expanded rows and on the case page), of what a review form posts to, and of the run page's
review filters. A fixed number of queries each, whatever the case's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Exists, OuterRef, Q
from django.shortcuts import get_object_or_404

from runs.core.reviewing.vocabulary import HumanVerdict
from runs.models import CaseRow, TurnRow
from runs.review_models import Review, ReviewChange
from runs.selectors.reviews import (
    FAILURE_OUTCOMES,
    Carried,
    CategoryChoice,
    carried_reviews,
    project_categories,
)

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from runs.models import Run

# The run page's review filters (``?review=``): cases with a failing turn nobody triaged, cases
# whose failing turns were all triaged, cases with a review whose verdict is not the machine's.
UNTRIAGED = "untriaged"
TRIAGED = "triaged"
DISAGREES = "disagrees"
REVIEW_FILTERS = (UNTRIAGED, TRIAGED, DISAGREES)
DISAGREEING = (HumanVerdict.SHOULD_PASS.value, HumanVerdict.SHOULD_FAIL.value)
# How much of a note a review's history shows of each change.
NOTE_SHOWN = 80


@dataclass(frozen=True)
class HistoryChange:
    """One change of a review as its history lists it: who, when, and what it changed."""

    by: str
    at: datetime
    fields: list[str]  # each field it changed, in words: "category: agent bug → grader wrong"
    first: bool  # the review's first version


@dataclass
class CaseReviews:
    """What the review panels of one case read: its turns' own reviews (by turn id), the
    reviews they carry from earlier runs (by turn id), the case's own review, every change of
    these (by review id), and the project's triage categories."""

    own: dict[int, Review] = field(default_factory=dict)
    carried: dict[int, Carried] = field(default_factory=dict)
    case_review: Review | None = None
    history: dict[int, list[HistoryChange]] = field(default_factory=dict)
    categories: list[CategoryChoice] = field(default_factory=list)


def is_failing(turn: TurnRow) -> bool:
    """A turn a reviewer triages: failed, errored or not graded (not passed, not skipped)."""
    return turn.outcome in FAILURE_OUTCOMES


def case_reviews(
    *, case: CaseRow, turns: Sequence[TurnRow], categories: bool = True
) -> CaseReviews:
    """The reviews the panels of ``case`` show, for its failing ``turns`` (at most four
    queries: the reviews of the case, the ones its turns carry, their changes, and with
    ``categories`` — a form to fill — the project's triage categories)."""
    project_id = case.run.project_id
    if project_id is None:
        return CaseReviews()
    failing = [turn for turn in turns if is_failing(turn)]
    found = _reviews_of_case(case)
    own = {review.turn_id: review for review in found if review.turn_id is not None}
    case_review = next((review for review in found if review.turn_id is None), None)
    untouched = [turn for turn in failing if turn.pk not in own or own[turn.pk].reopened]
    carried = carried_reviews(run=case.run, turns=untouched) if untouched else {}
    carried = not_reopened(carried, own)
    return CaseReviews(
        own=own,
        carried=carried,
        case_review=case_review,
        history=review_changes([review.pk for review in found]),
        categories=project_categories(project_id=project_id) if categories else [],
    )


def not_reopened(carried: dict[int, Carried], own: dict[int, Review]) -> dict[int, Carried]:
    """``carried`` (by turn id) without the reviews a turn's own review reopened on its run:
    reopened, the earlier review is no longer offered there."""
    return {
        turn_id: found
        for turn_id, found in carried.items()
        if not (
            turn_id in own
            and own[turn_id].reopened
            and own[turn_id].carried_from_id == found.review.pk
        )
    }


def _reviews_of_case(case: CaseRow) -> list[Review]:
    return list(
        Review.objects.filter(case=case).select_related(
            "category", "created_by", "updated_by", "assignee", "carried_from__run",
            "carried_from__updated_by",
        )
    )  # fmt: skip


def review_changes(review_ids: Iterable[int]) -> dict[int, list[HistoryChange]]:
    """Every change of the given reviews, newest first, by review id (one query)."""
    history: dict[int, list[HistoryChange]] = defaultdict(list)
    ids = list(review_ids)
    if not ids:
        return {}
    for change in ReviewChange.objects.filter(review_id__in=ids).select_related("by"):
        history[change.review_id].append(_change(change))
    return dict(history)


def _change(change: ReviewChange) -> HistoryChange:
    before, after = change.before or {}, change.after or {}
    changed = [
        _described(name, _shown(name, before.get(name)), _shown(name, after.get(name)))
        for name in ("verdict", "category", "note", "link", "assignee", "reopened")
        if before.get(name) != after.get(name) and (before or after.get(name))
    ]
    by = change.by.get_username() if change.by else ""
    return HistoryChange(by=by, at=change.at, fields=changed, first=not before)


def _described(name: str, before: str, after: str) -> str:
    """One field's change in words: "category: agent bug → grader wrong"."""
    if name == "reopened":
        return "reopened" if after else "no longer reopened"
    if not before:
        return f"{name}: {after}"
    return f"{name}: {before} → {after or '(none)'}"


def _shown(name: str, value: Any) -> str:
    """A field of a review's change in words ("" for none)."""
    if value in (None, "", False):
        return ""
    if name == "verdict":
        try:
            return HumanVerdict(value).label
        except ValueError:
            return str(value)
    if name == "assignee":
        return f"user #{value}"
    if name == "note" and len(str(value)) > NOTE_SHOWN:
        return str(value)[: NOTE_SHOWN - 1] + "…"
    if name == "reopened":
        return "reopened"
    return str(value)


# --- what a form posts to ------------------------------------------------------------------


def review_turn_get(*, run_id: int, case_id: int, turn_id: int) -> TurnRow:
    """One turn of a case of a run, with its case and run (one query; 404 when they do not
    belong together)."""
    return get_object_or_404(
        TurnRow.objects.select_related("case__run"), pk=turn_id, case_id=case_id, run_id=run_id
    )


def review_case_get(*, run_id: int, case_id: int) -> CaseRow:
    """One case of a run, with its run (one query; 404 when it is not the run's)."""
    return get_object_or_404(CaseRow.objects.select_related("run"), pk=case_id, run_id=run_id)


def project_turn_get(*, project_id: int, turn_id: int) -> TurnRow:
    """One turn of a run of the project, with its case and run (404 otherwise)."""
    return get_object_or_404(
        TurnRow.objects.select_related("case__run", "run"),
        pk=turn_id,
        run__project_id=project_id,
    )


def turn_reviews(*, turn: TurnRow) -> CaseReviews:
    """The review panel of one turn: its own review, the one it carries, their changes, the
    categories (four queries)."""
    own = (
        Review.objects.filter(turn=turn)
        .select_related("category", "created_by", "updated_by", "assignee",
                        "carried_from__run", "carried_from__updated_by")
        .first()
    )  # fmt: skip
    carried = {}
    if own is None or own.reopened:
        carried = carried_reviews(run=turn.case.run, turns=[turn])
        carried = not_reopened(carried, {turn.pk: own} if own is not None else {})
    return CaseReviews(
        own={turn.pk: own} if own is not None else {},
        carried=carried,
        history=review_changes([own.pk] if own is not None else []),
        categories=project_categories(project_id=turn.case.run.project_id),
    )


def case_own_review(*, case: CaseRow) -> CaseReviews:
    """The review panel of a case itself (three queries)."""
    review = (
        Review.objects.filter(case=case, turn__isnull=True)
        .select_related("category", "created_by", "updated_by")
        .first()
    )
    return CaseReviews(
        case_review=review,
        history=review_changes([review.pk] if review is not None else []),
        categories=project_categories(project_id=case.run.project_id),
    )


def earlier_review(*, turn: TurnRow, review_id: int) -> Carried | None:
    """The earlier run's review ``review_id`` as ``turn`` carries it (None when it carries
    another, or none): what Confirm and Reopen act on (one query)."""
    found = carried_reviews(run=turn.case.run, turns=[turn]).get(turn.pk)
    return found if found is not None and found.review.pk == review_id else None


# --- the run page's review filters ------------------------------------------------------------


def _triaging() -> Q:
    """A review that triages its turn: not reopened, with a verdict or a category."""
    return Q(reopened=False) & (~Q(verdict="") | Q(category__isnull=False))


def cases_by_review(cases: QuerySet[CaseRow], *, run: Run, which: str) -> QuerySet[CaseRow]:
    """``cases`` (a run's case rows) narrowed to the review filter ``which`` (one of
    ``REVIEW_FILTERS``; "" leaves them as they are): semi-joins on the run's failing turns and
    reviews, in the same query."""
    if not which:
        return cases
    if which == DISAGREES:
        disagreeing = Review.objects.filter(run=run, reopened=False, verdict__in=DISAGREEING)
        return cases.filter(pk__in=disagreeing.values("case_id"))
    untriaged_turns = _untriaged_turns(run)
    if which == UNTRIAGED:
        return cases.filter(pk__in=untriaged_turns)
    failing = TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES).values("case_id")
    return cases.filter(pk__in=failing).exclude(pk__in=untriaged_turns)


def _untriaged_turns(run: Run) -> QuerySet[Any, Any]:
    """The case ids of the run's failing turns no review of their own triages."""
    triaged = Review.objects.filter(_triaging(), turn=OuterRef("pk"))
    return (
        TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES)
        .filter(~Exists(triaged))
        .values("case_id")
    )


def review_list_count(*, run: Run, which: str) -> int | None:
    """How many cases the review filter ``which`` alone lists, counted from the run's failing
    turns and reviews (thousands of rows) rather than by matching its 100,000 case rows; None
    without a filter, or for a repeated run (its list counts case indices)."""
    if not which or run.repeats > 1:
        return None
    if which == DISAGREES:
        disagreeing = Review.objects.filter(run=run, reopened=False, verdict__in=DISAGREEING)
        return int(disagreeing.exclude(case_id=None).values("case_id").distinct().count())
    untriaged = int(_untriaged_turns(run).distinct().count())
    if which == UNTRIAGED:
        return untriaged
    failing = TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES)
    return int(failing.values("case_id").distinct().count()) - untriaged

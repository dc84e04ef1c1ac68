"""Reads of reviews: a run's own reviews, the reviews its failing turns carry from earlier runs
(known, the same turn failing another way, or stale), its review state in counts, and a
project's triage categories. A fixed number of queries each, whatever the run's size."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery

from runs.core.reviewing.vocabulary import DEFAULT_CATEGORIES, HumanVerdict
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.summary import RunSummary
from runs.models import TurnRow
from runs.review_models import Review, TriageCategory

if TYPE_CHECKING:
    from runs.models import Run

# The turns a reviewer triages: those that did not pass and were not skipped.
FAILURE_OUTCOMES = (Outcome.FAILED.value, Outcome.ERROR.value, Outcome.NOT_GRADED.value)

KNOWN = "known"  # the same turn, defined the same, failing the same way
OTHER_FAILURE = "other_failure"  # the same turn, defined the same, failing another way
STALE = "stale"  # the turn's definition changed since: shown, never as current


@dataclass(frozen=True)
class Carried:
    """An earlier run's review of the same turn, and how it holds here."""

    review: Review
    state: str

    @property
    def is_known(self) -> bool:
        return self.state == KNOWN

    @property
    def is_stale(self) -> bool:
        return self.state == STALE


@dataclass(frozen=True)
class CategoryChoice:
    """A triage category as the pages offer it (not stored yet: a project's defaults)."""

    name: str
    key: str
    id: int | None = None
    archived: bool = False


@dataclass
class ReviewTally:
    """A run's failures and what people said of them (every count here uses people's
    verdicts, and says so on the page)."""

    failures: int = 0
    triaged: int = 0
    known: int = 0  # untriaged, with a known review carried from an earlier run
    disagrees: int = 0  # triaged, the person disagreeing with the machine
    by_category: dict[str, int] = field(default_factory=dict)

    @property
    def untriaged(self) -> int:
        return self.failures - self.triaged


def project_categories(*, project_id: int | None) -> list[CategoryChoice]:
    """The project's categories, or its defaults while none is stored (none without one)."""
    if project_id is None:
        return []
    stored = [
        CategoryChoice(category.name, category.key, category.pk, category.archived)
        for category in TriageCategory.objects.filter(project_id=project_id)
    ]
    return stored or [CategoryChoice(name, key) for name, key in DEFAULT_CATEGORIES]


def run_reviews(*, run: Run) -> dict[int, Review]:
    """The run's own reviews of its turns, by turn id (one query)."""
    reviews = Review.objects.filter(run=run, turn__isnull=False).select_related(
        "category", "created_by", "updated_by", "carried_from__run"
    )
    return {review.turn_id: review for review in reviews if review.turn_id is not None}


def carried_reviews(*, run: Run, turns: Sequence[TurnRow]) -> dict[int, Carried]:
    """For each of ``turns`` (of ``run``), the newest review of the same turn (by place) from
    another run of the project, and whether it is known here, about another failure, or
    stale (one query)."""
    if run.project_id is None or not turns:
        return {}
    keys = {turn.turn_key for turn in turns if turn.turn_key}
    newest: dict[str, Review] = {}
    for review in (
        Review.objects.filter(project_id=run.project_id, turn_key__in=keys, reopened=False)
        .exclude(run=run)
        .exclude(verdict="")
        .select_related("category", "updated_by", "run")
        .order_by("turn_key", "-updated_at", "-id")
    ):
        newest.setdefault(review.turn_key, review)
    return {
        turn.pk: Carried(newest[turn.turn_key], _state(newest[turn.turn_key], turn))
        for turn in turns
        if turn.turn_key in newest
    }


def _state(review: Review, turn: TurnRow) -> str:
    if review.definition != turn.definition:
        return STALE
    return KNOWN if review.failure == turn.failure else OTHER_FAILURE


def run_review_tally(*, run: Run) -> ReviewTally:
    """The run's failing turns, how many people triaged (and into which category), how many
    they disagree with, and how many untriaged ones carry a known review from an earlier run:
    counted by the database (three queries, whatever the run's size)."""
    failing = TurnRow.objects.filter(run=run, outcome__in=FAILURE_OUTCOMES)
    own = Review.objects.filter(run=run, turn__outcome__in=FAILURE_OUTCOMES)
    triaging = own.filter(reopened=False).filter(~Q(verdict="") | Q(category__isnull=False))
    stored = _failing_turns_stored(run)
    tally = ReviewTally(failures=failing.count() if stored is None else stored)
    against = (HumanVerdict.SHOULD_PASS.value, HumanVerdict.SHOULD_FAIL.value)
    by_category: list[tuple[int, int, str]] = []  # (-count, position, name)
    for name, position, count, disagreeing in (
        triaging.values_list("category__name", "category__position")
        .annotate(n=Count("pk"), against=Count("pk", filter=Q(verdict__in=against)))
        .order_by()
    ):
        tally.triaged += count
        tally.disagrees += disagreeing
        if name:
            by_category.append((-count, position, name))
    # The largest first; a tie in the project's order of its categories.
    tally.by_category = {name: -count for count, _, name in sorted(by_category)}
    tally.known = _known_count(run, failing.exclude(pk__in=own.values("turn_id")))
    return tally


def _failing_turns_stored(run: Run) -> int | None:
    """How many of a finished run's turns failed, errored or could not be graded, from its
    stored summary (its rows change no more); None while it runs (then they are counted)."""
    summary = None if run.is_live else RunSummary.stored(run.summary)
    if summary is None:
        return None
    return summary.turns.failed + summary.turns.error + summary.turns.not_graded


def _known_count(run: Run, turns: QuerySet[TurnRow]) -> int:
    """How many of ``turns`` (of ``run``, with no review of their own) carry a known review:
    the newest review of the same place from another run (``carried_reviews``) was made on the
    same definition failing the same way (one query: an index seek per turn)."""
    if run.project_id is None:
        return 0
    newest = (
        Review.objects.filter(project_id=run.project_id, turn_key=OuterRef("turn_key"),
                              reopened=False)
        .exclude(run_id=run.pk)
        .exclude(verdict="")
        .order_by("-updated_at", "-id")
    )  # fmt: skip
    reviewed = Review.objects.filter(project_id=run.project_id, reopened=False).exclude(
        run_id=run.pk
    )
    if not reviewed.exclude(verdict="").exists():  # no review from another run: none known
        return 0
    # Only the turns of a place some other run's review names (a hash of those places, not an
    # index seek per failing turn of the run).
    turns = turns.filter(turn_key__in=reviewed.exclude(verdict="").values("turn_key"))
    return (
        turns.annotate(
            earlier_definition=Subquery(newest.values("definition")[:1]),
            earlier_failure=Subquery(newest.values("failure")[:1]),
        )
        .filter(earlier_definition=F("definition"), earlier_failure=F("failure"))
        .count()
    )


def is_triaged(review: Review) -> bool:
    """A review with a verdict or a category, not reopened."""
    return not review.reopened and bool(review.verdict or review.category_id)


def disagrees(review: Review) -> bool:
    """The person's verdict differs from the machine's."""
    return review.verdict in (HumanVerdict.SHOULD_PASS.value, HumanVerdict.SHOULD_FAIL.value)


def reviews_of_turns(turn_ids: Iterable[int]) -> dict[int, Review]:
    """The reviews of the given turns, by turn id (one query)."""
    reviews = Review.objects.filter(turn_id__in=list(turn_ids)).select_related(
        "category", "updated_by"
    )
    return {review.turn_id: review for review in reviews if review.turn_id is not None}


def review_history(*, review: Review) -> list[dict[str, object]]:
    """Every change of the review, newest first, with who made it."""
    return [
        {"by": change.by.get_username() if change.by else "", "at": change.at,
         "before": change.before, "after": change.after}
        for change in review.changes.select_related("by")
    ]  # fmt: skip


def untriaged_filter() -> Q:
    """Turns with no triaging review of their own (for the run page's filter)."""
    triaged = Q(reviews__reopened=False) & (
        ~Q(reviews__verdict="") | Q(reviews__category__isnull=False)
    )
    return ~Q(pk__in=TurnRow.objects.filter(triaged).values("pk"))

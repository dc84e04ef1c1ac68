"""The review queue of a project: the failing turns nobody triaged in the runs chosen (by
default the latest finished run of each branch), newest run first, one page at a time, with
what each one's panel needs (its failed metrics, a review assigning it, the review it carries
from an earlier run) and the progress over them all. A fixed number of queries, whatever the
number of failures (eleven; ``tests/web/test_review_pages.py`` counts them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.paginator import Page, Paginator
from django.db.models import Exists, Max, OuterRef, Q

from runs.core.reviewing.vocabulary import Role
from runs.core.verdicts.outcomes import RUN_FINISHED_STATES, Outcome
from runs.models import MetricRow, Run, TurnRow
from runs.review_models import Review
from runs.selectors.review_panels import not_reopened
from runs.selectors.reviews import (
    FAILURE_OUTCOMES,
    KNOWN,
    OTHER_FAILURE,
    STALE,
    Carried,
    CategoryChoice,
    is_triaged,
    project_categories,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import QuerySet

# Failing turns per page of the queue: a page draws in a few ms whatever the queue's length.
QUEUE_PAGE = 20
# How many of the project's finished runs the queue offers to choose from.
CHOOSABLE_RUNS = 30
# At most this many runs at once.
MOST_RUNS = 20
REVIEWING_ROLES = tuple(role.value for role in Role if role.allows(Role.REVIEWER))
TURN_FIELDS = (
    "id", "run_id", "case_id", "index", "outcome", "input", "response", "ground_truth",
    "errors", "kind_outcomes", "skipped", "turn_key", "definition", "failure",
    "case__id", "case__name", "case__index", "case__repetition", "case__turn_count",
    "run__id", "run__git_branch", "run__git_commit", "run__created_at", "run__project_id",
)  # fmt: skip


@dataclass(frozen=True)
class QueueItem:
    """One failing turn of the queue: the turn (with its case and run), the metrics that
    failed or could not grade, its own review when it has one that does not triage it (an
    assignment, a reopened review), and the review it carries from an earlier run."""

    turn: TurnRow
    failed_metrics: list[tuple[str, str]]  # (name, outcome)
    review: Review | None
    carried: Carried | None

    @property
    def tools_failed(self) -> bool:
        return Outcome.of((self.turn.kind_outcomes or {}).get("tools")).is_failed

    @property
    def triaged(self) -> bool:
        return self.review is not None and is_triaged(self.review)

    @property
    def first_error(self) -> str:
        errors = self.turn.errors or []
        return str(errors[0]).splitlines()[0] if errors and str(errors[0]) else ""


@dataclass(frozen=True)
class Progress:
    """How far the queue's runs are triaged: their failing turns, and how many nobody
    triaged (people's reviews, counted)."""

    failures: int
    untriaged: int

    @property
    def triaged(self) -> int:
        return self.failures - self.untriaged

    @property
    def percent(self) -> int:
        return round(100 * self.triaged / self.failures) if self.failures else 100


@dataclass
class Queue:
    """The queue of the chosen runs: the progress over all their failing turns and one page of
    the untriaged ones (those given to the user, with ``mine``)."""

    runs: list[Run]
    choices: list[Run]
    progress: Progress
    page: Page[Any]
    items: list[QueueItem] = field(default_factory=list)
    categories: list[CategoryChoice] = field(default_factory=list)
    default_runs: bool = True


def _failing(run_ids: Sequence[int]) -> QuerySet[TurnRow]:
    return TurnRow.objects.filter(run_id__in=list(run_ids), outcome__in=FAILURE_OUTCOMES)


def _untriaged(run_ids: Sequence[int]) -> QuerySet[TurnRow]:
    return _failing(run_ids).filter(
        ~Exists(Review.objects.filter(_triaging(), turn=OuterRef("pk")))
    )


def queue_progress(*, run_ids: Sequence[int]) -> Progress:
    """The failing turns of the runs, and how many are untriaged (two queries)."""
    return Progress(failures=_failing(run_ids).count(), untriaged=_untriaged(run_ids).count())


def review_queue(
    *, project_id: int, run_ids: Sequence[int], user: Any, mine: bool, page: str | None
) -> Queue:
    """The queue of the runs ``run_ids`` of the project (none: the latest finished run of each
    branch); ``mine``: only the turns assigned to ``user``; ``page``: which page."""
    choices = list(_finished(project_id).only(*RUN_FIELDS)[:CHOOSABLE_RUNS])
    ids = list(run_ids) or _latest_of_each_branch(project_id)
    runs = list(
        Run.objects.filter(project_id=project_id, pk__in=ids).only(*RUN_FIELDS).order_by("-id")
    )
    chosen = [run.pk for run in runs]
    untriaged = _untriaged(chosen)
    if mine:
        untriaged = untriaged.filter(
            Exists(Review.objects.filter(turn=OuterRef("pk"), assignee_id=user.pk))
        )
    ordered = (
        untriaged.select_related("case", "run")
        .only(*TURN_FIELDS)
        .order_by("-run_id", "case__index", "case__repetition", "index")
    )
    shown = Paginator(ordered, QUEUE_PAGE).get_page(page)
    return Queue(
        runs=runs,
        choices=choices,
        progress=queue_progress(run_ids=chosen),
        page=shown,
        items=queue_items(project_id=project_id, turns=list(shown.object_list)),
        categories=project_categories(project_id=project_id),
        default_runs=not run_ids,
    )


RUN_FIELDS = ("id", "git_branch", "git_commit", "created_at", "status", "project_id")


def _finished(project_id: int) -> Any:
    return Run.objects.filter(project_id=project_id, status__in=RUN_FINISHED_STATES).order_by(
        "-created_at", "-id"
    )


def _latest_of_each_branch(project_id: int) -> list[int]:
    """The newest finished run of each branch of the project (one query)."""
    return [
        row["last"]
        for row in Run.objects.filter(project_id=project_id, status__in=RUN_FINISHED_STATES)
        .order_by()
        .values("git_branch")
        .annotate(last=Max("id"))
    ]


def _triaging() -> Q:
    """A review that triages its turn: not reopened, with a verdict or a category."""
    return Q(reopened=False) & (~Q(verdict="") | Q(category__isnull=False))


def queue_items(*, project_id: int, turns: list[TurnRow]) -> list[QueueItem]:
    """What the queue shows of ``turns``: their failed metrics, their own reviews, the reviews
    they carry (three queries)."""
    if not turns:
        return []
    ids = [turn.pk for turn in turns]
    failed: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for turn_id, name, outcome in (
        MetricRow.objects.filter(turn_id__in=ids)
        .exclude(outcome=Outcome.PASSED.value)
        .order_by("turn_id", "position", "id")
        .values_list("turn_id", "metric_name", "outcome")
    ):
        failed[turn_id].append((name, outcome))
    own: dict[int, Review] = {
        int(review.turn_id or 0): review
        for review in Review.objects.filter(turn_id__in=ids).select_related(
            "assignee", "category", "updated_by"
        )
    }
    carried = not_reopened(_carried(project_id, turns), own)
    return [
        QueueItem(turn, failed.get(turn.pk, []), own.get(turn.pk), carried.get(turn.pk))
        for turn in turns
    ]


def _carried(project_id: int, turns: list[TurnRow]) -> dict[int, Carried]:
    """For each turn, the newest review of the same turn (by place) from another run (one
    query for turns of several runs: ``selectors.reviews.carried_reviews`` reads one run's)."""
    keys = {turn.turn_key for turn in turns if turn.turn_key}
    by_key: dict[str, list[Review]] = defaultdict(list)
    for review in (
        Review.objects.filter(project_id=project_id, turn_key__in=keys, reopened=False)
        .exclude(verdict="")
        .select_related("category", "updated_by", "run")
        .order_by("turn_key", "-updated_at", "-id")
    ):
        by_key[review.turn_key].append(review)
    found = {}
    for turn in turns:
        earlier = next((r for r in by_key.get(turn.turn_key, []) if r.run_id != turn.run_id), None)
        if earlier is not None:
            found[turn.pk] = Carried(earlier, _state(earlier, turn))
    return found


def _state(review: Review, turn: TurnRow) -> str:
    if review.definition != turn.definition:
        return STALE
    return KNOWN if review.failure == turn.failure else OTHER_FAILURE


def review_assignees(*, project_id: int) -> list[AbstractBaseUser]:
    """Who a failure can be given to: the project's reviewers, runners and admins, and staff
    (one query)."""
    users = get_user_model().objects.filter(is_active=True)
    given = Q(project_roles__project_id=project_id, project_roles__role__in=REVIEWING_ROLES)
    return list(users.filter(given | Q(is_staff=True)).distinct().order_by("username")[:200])

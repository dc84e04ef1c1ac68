"""Reviews: a run's reviews and the reviews its failing turns carry from earlier runs; a turn's
review written, a carried review confirmed or reopened; a project's review queue.

Reading needs a signed-in caller (a token or the browser's session); writing needs the reviewer
role in the run's project (or runner, admin; staff everywhere): 403 with what is missing
otherwise. Every accepted write goes through ``runs.services.reviews``, which keeps the change
and writes the audit log; a refused one writes nothing. A review never changes the machine's
verdict: both are in every answer.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError

from runs import selectors
from runs.api.auth import role_only
from runs.api.schemas import Id, SafeText, responses
from runs.core.reviewing.vocabulary import HumanVerdict, Role
from runs.selectors.review_api import (
    case_review_of,
    review_case_at,
    review_get,
    review_turn_at,
    run_review_listing,
    turn_review_state,
)
from runs.selectors.review_queue import QUEUE_PAGE, review_queue
from runs.selectors.reviews import KNOWN, OTHER_FAILURE, STALE, Carried, disagrees, is_triaged
from runs.services.reviews import (
    MAX_NOTE,
    ReviewError,
    ReviewInput,
    review_confirm,
    review_reopen,
    review_save,
)

if TYPE_CHECKING:
    from runs.models import TurnRow
    from runs.review_models import Review

router = Router(tags=["reviews"])

ACTION = "review runs"
TurnIndex = Annotated[
    int, Field(ge=0, le=1_000_000, description="the turn's stored index (from 0)")
]
CarriedState = Literal["known", "other_failure", "stale"]
_STATE_HELP = (
    "known: the same turn, defined the same, failing the same way (confirm it or reopen it); "
    "other_failure: the same turn failing another way; stale: the turn's definition changed "
    "since (shown, never current)"
)


# --- schemas ----------------------------------------------------------------------------------


class ReviewIn(Schema):
    """A review of a turn: what the reviewer says of the machine's verdict, a triage category
    of the project (by name; "" for none), a Markdown note, a link (http or https)."""

    verdict: HumanVerdict = Field(description="agrees, should_pass, should_fail or unsure")
    category: SafeText = Field("", description="a triage category of the project, by name")
    note: str = Field("", max_length=MAX_NOTE, description="Markdown, shown safely")
    link: SafeText = Field("", description="an issue's address: http:// or https://")


class CarriedIn(Schema):
    earlier: Id | None = Field(
        None,
        description="the earlier review you mean (its id, from GET .../reviews): refused with "
        "409 when the turn no longer carries it",
    )


class ReviewOut(Schema):
    """A review of a turn (or, with no turn, of its case) of one run, beside the machine's
    verdict it was made on."""

    id: int
    run: int
    case_id: int
    case_name: str
    case_index: int
    repetition: int
    turn_id: int | None
    turn_index: int | None = Field(description="the turn's stored index (from 0); null: the case")
    machine_outcome: str = Field(description="the machine's verdict when it was reviewed")
    verdict: HumanVerdict | None = Field(description="null: reopened, to be triaged again")
    category: str | None
    note: str
    link: str
    triaged: bool = Field(description="a verdict or a category, not reopened")
    disagrees: bool = Field(description="the person's verdict is not the machine's")
    reopened: bool
    assignee: str | None
    carried_from: int | None = Field(description="the earlier review it confirmed or reopened")
    created_by: str | None
    created_at: datetime
    updated_by: str | None
    updated_at: datetime


class EarlierReviewOut(Schema):
    """A review made on an earlier run of the same turn."""

    id: int
    run: int
    verdict: HumanVerdict | None
    category: str | None
    note: str
    link: str
    updated_by: str | None
    updated_at: datetime


class CarriedOut(Schema):
    turn_id: int
    case_id: int
    case_name: str
    repetition: int
    turn_index: int
    outcome: str = Field(description="the turn's verdict on this run")
    state: CarriedState = Field(description=_STATE_HELP)
    review: EarlierReviewOut


class TallyOut(Schema):
    """The run's failing turns (failed, errored, not graded) and what people said of them."""

    failures: int
    triaged: int
    untriaged: int
    known: int = Field(description="untriaged, carrying a known review from an earlier run")
    disagrees: int = Field(description="triaged, the person disagreeing with the machine")
    by_category: dict[str, int]


class RunReviewsOut(Schema):
    run: int
    tally: TallyOut
    reviews: list[ReviewOut] = Field(description="the run's own, by case and turn")
    carried: list[CarriedOut] = Field(
        description="per failing turn, the newest review of the same turn from another run"
    )


class TurnReviewOut(Schema):
    review: ReviewOut | None
    carried: CarriedOut | None


class CaseReviewOut(Schema):
    review: ReviewOut | None = Field(description="the case's own review; null: none")


class FailedMetricOut(Schema):
    name: str
    outcome: str


class QueueItemOut(Schema):
    run: int
    git_branch: str
    turn_id: int
    case_id: int
    case_name: str
    repetition: int
    turn_index: int
    outcome: str
    failed_metrics: list[FailedMetricOut]
    assignee: str | None
    carried: CarriedOut | None


class QueueOut(Schema):
    """Untriaged failures of the runs chosen (default: the latest finished run of each branch),
    newest run first, one page at a time."""

    runs: list[int]
    failures: int
    triaged: int
    untriaged: int
    page: int
    pages: int
    items: list[QueueItemOut]


class QueueQuery(Schema):
    runs: str = Field(
        "", max_length=400, description="run ids, comma-separated; none: the latest finished "
        "run of each branch"
    )  # fmt: skip
    mine: bool = Field(False, description="only the failures given to you")
    page: int = Field(1, ge=1, le=1_000_000, description=f"{QUEUE_PAGE} failures a page")


# --- answers ----------------------------------------------------------------------------------


def _name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def review_out(review: "Review") -> dict[str, Any]:
    turn = review.turn
    return {
        "id": review.pk,
        "run": review.run_id,
        "case_id": review.case_id,
        "case_name": review.case.name,
        "case_index": review.case.index,
        "repetition": review.case.repetition,
        "turn_id": review.turn_id,
        "turn_index": turn.index if turn is not None else None,
        "machine_outcome": review.machine_outcome,
        "verdict": review.verdict or None,
        "category": review.category.name if review.category else None,
        "note": review.note,
        "link": review.link,
        "triaged": is_triaged(review),
        "disagrees": disagrees(review),
        "reopened": review.reopened,
        "assignee": _name(review.assignee),
        "carried_from": review.carried_from_id,
        "created_by": _name(review.created_by),
        "created_at": review.created_at,
        "updated_by": _name(review.updated_by),
        "updated_at": review.updated_at,
    }


def _turn_place(turn: "TurnRow") -> dict[str, Any]:
    """Which turn of which case (and repetition) an answer is about, and its verdict."""
    return {
        "turn_id": turn.pk,
        "case_id": turn.case_id,
        "case_name": turn.case.name,
        "repetition": turn.case.repetition,
        "turn_index": turn.index,
        "outcome": turn.outcome,
    }


def carried_out(turn: "TurnRow", carried: Carried) -> dict[str, Any]:
    earlier = carried.review
    state = {KNOWN: KNOWN, OTHER_FAILURE: OTHER_FAILURE, STALE: STALE}[carried.state]
    return {
        **_turn_place(turn),
        "state": state,
        "review": {
            "id": earlier.pk,
            "run": earlier.run_id,
            "verdict": earlier.verdict or None,
            "category": earlier.category.name if earlier.category else None,
            "note": earlier.note,
            "link": earlier.link,
            "updated_by": _name(earlier.updated_by),
            "updated_at": earlier.updated_at,
        },
    }


def _turn_review(turn: "TurnRow") -> dict[str, Any]:
    own, carried = turn_review_state(turn=turn)
    return {
        "review": review_out(own) if own is not None else None,
        "carried": carried_out(turn, carried) if carried is not None else None,
    }


# --- reads ------------------------------------------------------------------------------------


@router.get("/runs/{run_id}/reviews", response=responses({200: RunReviewsOut}, 404))
def run_reviews(request: HttpRequest, run_id: Id) -> object:
    """The run's reviews and, per failing turn, the review it carries from an earlier run with
    its state; the run's review state in counts (people's verdicts, counted)."""
    run = selectors.run_row(run_id=run_id, only=("id", "project_id"))
    found = run_review_listing(run=run)
    tally = found.tally
    return {
        "run": run.pk,
        "tally": {**vars(tally), "untriaged": tally.untriaged},
        "reviews": [review_out(review) for review in found.reviews],
        "carried": [carried_out(item.turn, item.carried) for item in found.carried],
    }


@router.get(
    "/runs/{run_id}/cases/{case_id}/turns/{index}/review",
    response=responses({200: TurnReviewOut}, 404),
)
def turn_review(request: HttpRequest, run_id: Id, case_id: Id, index: TurnIndex) -> object:
    """One turn's own review (null: none) and the review it carries from an earlier run."""
    return _turn_review(review_turn_at(run_id=run_id, case_id=case_id, index=index))


@router.get("/projects/{project_id}/review-queue", response=responses({200: QueueOut}, 404))
def project_review_queue(request: HttpRequest, project_id: Id, query: Query[QueueQuery]) -> object:
    """The project's untriaged failures (the review queue), newest run first, with their
    failed metrics and the reviews they carry; ``triaged`` of ``failures`` over the runs."""
    project = selectors.project_get(project_id=project_id)
    queue = review_queue(
        project_id=project.pk, run_ids=_run_ids(query.runs), user=request.auth,  # type: ignore[attr-defined]
        mine=query.mine, page=str(query.page),
    )  # fmt: skip
    progress = queue.progress
    return {
        "runs": [run.pk for run in queue.runs],
        "failures": progress.failures,
        "triaged": progress.triaged,
        "untriaged": progress.untriaged,
        "page": queue.page.number,
        "pages": queue.page.paginator.num_pages,
        "items": [_queue_item(item) for item in queue.items],
    }


def _run_ids(text: str) -> list[int]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not all(part.isascii() and part.isdigit() and len(part) < 19 for part in ids):
        raise HttpError(422, "runs: run ids (ASCII digits), comma-separated")
    return [int(part) for part in ids]


def _queue_item(item: Any) -> dict[str, Any]:
    turn = item.turn
    return {
        "run": turn.run_id,
        "git_branch": turn.run.git_branch,
        **_turn_place(turn),
        "failed_metrics": [{"name": n, "outcome": o} for n, o in item.failed_metrics],
        "assignee": _name(item.review.assignee) if item.review is not None else None,
        "carried": carried_out(turn, item.carried) if item.carried is not None else None,
    }


# --- writes -----------------------------------------------------------------------------------

WRITE_ERRORS = (403, 404, 409)


@router.put(
    "/runs/{run_id}/cases/{case_id}/turns/{index}/review",
    response=responses({200: ReviewOut, 201: ReviewOut}, *WRITE_ERRORS),
)
def turn_review_put(
    request: HttpRequest, run_id: Id, case_id: Id, index: TurnIndex, payload: ReviewIn
) -> object:
    """Write the turn's review (201 when it had none): its verdict, category, note and link;
    kept with every change and written to the audit log. Needs the reviewer role."""
    turn = _writable(request, run_id, case_id, index)
    own, _ = turn_review_state(turn=turn)
    data = ReviewInput(
        verdict=payload.verdict.value,
        category=payload.category,
        note=payload.note,
        link=payload.link,
        assignee_id=own.assignee_id if own is not None else None,
    )
    user = request.auth  # type: ignore[attr-defined]
    review = _written(lambda: review_save(user=user, case=turn.case, turn=turn, data=data))
    if isinstance(review, tuple):
        return review
    return (200 if own is not None else 201), review_out(review_get(review_id=review.pk))


@router.post(
    "/runs/{run_id}/cases/{case_id}/turns/{index}/review/confirm",
    response=responses({200: ReviewOut}, *WRITE_ERRORS),
)
def turn_review_confirm(
    request: HttpRequest,
    run_id: Id,
    case_id: Id,
    index: TurnIndex,
    payload: CarriedIn | None = None,
) -> object:
    """Confirm for this run the known review the turn carries from an earlier run: the same
    verdict, category, note and link, linked to it. Needs the reviewer role."""
    return _on_carried(request, run_id, case_id, index, payload, review_confirm)


@router.post(
    "/runs/{run_id}/cases/{case_id}/turns/{index}/review/reopen",
    response=responses({200: ReviewOut}, *WRITE_ERRORS),
)
def turn_review_reopen(
    request: HttpRequest,
    run_id: Id,
    case_id: Id,
    index: TurnIndex,
    payload: CarriedIn | None = None,
) -> object:
    """The known review the turn carries does not hold on this run: its failure is to be
    triaged again. Needs the reviewer role."""
    return _on_carried(request, run_id, case_id, index, payload, review_reopen)


@router.get(
    "/runs/{run_id}/cases/{case_id}/review",
    response=responses({200: CaseReviewOut}, 404),
)
def case_review(request: HttpRequest, run_id: Id, case_id: Id) -> object:
    """The case's own review (of the case itself, beside its turns'; null: none)."""
    own = case_review_of(case=review_case_at(run_id=run_id, case_id=case_id))
    return {"review": review_out(own) if own is not None else None}


@router.put(
    "/runs/{run_id}/cases/{case_id}/review",
    response=responses({200: ReviewOut, 201: ReviewOut}, *WRITE_ERRORS),
)
def case_review_put(request: HttpRequest, run_id: Id, case_id: Id, payload: ReviewIn) -> object:
    """Write the case's own review (201 when it had none), as a turn's. Needs the reviewer
    role."""
    case = review_case_at(run_id=run_id, case_id=case_id)
    role_only(request, project_id=case.run.project_id, needed=Role.REVIEWER, action=ACTION)
    own = case_review_of(case=case)
    data = ReviewInput(
        verdict=payload.verdict.value, category=payload.category, note=payload.note,
        link=payload.link, assignee_id=own.assignee_id if own is not None else None,
    )  # fmt: skip
    user = request.auth  # type: ignore[attr-defined]
    review = _written(lambda: review_save(user=user, case=case, turn=None, data=data))
    if isinstance(review, tuple):
        return review
    return (200 if own is not None else 201), review_out(review_get(review_id=review.pk))


def _writable(request: HttpRequest, run_id: int, case_id: int, index: int) -> "TurnRow":
    turn = review_turn_at(run_id=run_id, case_id=case_id, index=index)
    role_only(request, project_id=turn.case.run.project_id, needed=Role.REVIEWER, action=ACTION)
    return turn


def _on_carried(
    request: HttpRequest, run_id: int, case_id: int, index: TurnIndex, payload: CarriedIn | None,
    act: Any,
) -> object:  # fmt: skip
    turn = _writable(request, run_id, case_id, index)
    _, carried = turn_review_state(turn=turn)
    if carried is None:
        raise HttpError(409, "this turn carries no review from an earlier run")
    if payload is not None and payload.earlier is not None and payload.earlier != carried.review.pk:
        raise HttpError(409, f"this turn no longer carries review {payload.earlier}: it carries "
                             f"review {carried.review.pk} (GET its reviews again)")  # fmt: skip
    if not carried.is_known:
        raise HttpError(
            409,
            "only a known review (the same turn, defined the same, failing the "
            f"same way) is confirmed or reopened; this one is {carried.state}",
        )
    user = request.auth  # type: ignore[attr-defined]
    review = _written(lambda: act(user=user, case=turn.case, turn=turn, earlier=carried.review))
    if isinstance(review, tuple):
        return review
    return review_out(review_get(review_id=review.pk))


def _written(write: Any) -> Any:
    """The service's write, or its ``ReviewError`` as an answer: 422 naming the field (409 for
    a review saved meanwhile by another request)."""
    try:
        return write()
    except ReviewError as refused:
        if refused.field == "turn":
            raise HttpError(409, str(refused)) from None
        field_error = {"loc": ["body", "payload", refused.field], "msg": str(refused),
                       "type": "value_error"}  # fmt: skip
        return 422, {"detail": [field_error]}

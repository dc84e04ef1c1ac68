"""The review queue of a project (``/projects/<id>/review/``): the failing turns nobody triaged
in the runs chosen (by default the latest finished run of each branch), newest run first, a
page at a time, each with its failure in short and its transcript a click away; and the posts
that triage one (a verdict and a category, a note), confirm the review it carries from an
earlier run, or give it to someone.

Keyboard first (static/js/review_queue.js): j / k next and previous, a category's key triages
the current failure into it, 1–4 its verdict, n its note, y confirms its known review. Each post
answers with the failure's item drawn again and the progress ("12 of 40 triaged") out of band.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import HumanVerdict, Role
from runs.selectors.access import user_can
from runs.selectors.review_panels import project_turn_get
from runs.selectors.review_queue import (
    MOST_RUNS,
    QueueItem,
    queue_items,
    queue_progress,
    review_assignees,
)
from runs.selectors.review_queue import (
    review_queue as queue_get,
)
from runs.selectors.reviews import CategoryChoice, project_categories
from runs.services.reviews import (
    ReviewError,
    review_assign,
    review_confirm,
    review_save,
)
from runs.web.params import BadParam, flag_param, int_list_param, page_param
from runs.web.reviews import carried_named, refusal, review_input
from runs.web.views import HtmxHttpRequest

if TYPE_CHECKING:
    from runs.models import TurnRow

ITEM = "runs/review_queue.html#item_response"


@dataclass(frozen=True)
class ItemUrls:
    """Where a queue item links and posts to (reversed once per page, then filled in: the URL
    resolver is too slow to call a few times for each of a page's items)."""

    case: str
    run: str
    transcript: str
    triage: str
    confirm: str
    assign: str
    earlier: str


@dataclass(frozen=True)
class QueueRow:
    item: QueueItem
    urls: ItemUrls


def _filled(name: str, count: int) -> Callable[..., str]:
    """``reverse(name, args=[...])`` for many args: reversed once with placeholders, then
    filled in (every argument of these URLs is a number)."""
    marks = [9_000_000_001 + n for n in range(count)]
    template = reverse(name, args=marks)
    for n, mark in enumerate(marks):
        template = template.replace(str(mark), f"{{{n}}}")
    return lambda *args: template.format(*args)


def queue_rows(items: list[QueueItem]) -> list[QueueRow]:
    """The items with their URLs."""
    case, run = _filled("case_detail", 2), _filled("run_detail", 1)
    transcript = _filled("case_transcript", 2)
    triage, confirm = _filled("queue_triage", 2), _filled("queue_confirm", 2)
    assign = _filled("queue_assign", 2)
    rows = []
    for item in items:
        turn = item.turn
        project, earlier = turn.run.project_id, item.carried.review if item.carried else None
        urls = ItemUrls(
            case=case(turn.run_id, turn.case_id),
            run=run(turn.run_id),
            transcript=transcript(turn.run_id, turn.case_id),
            triage=triage(project, turn.pk),
            confirm=confirm(project, turn.pk),
            assign=assign(project, turn.pk),
            earlier=case(earlier.run_id, earlier.case_id) if earlier else "",
        )
        rows.append(QueueRow(item, urls))
    return rows


@login_required
@require_GET
def review_queue(request: HttpRequest, project_id: int) -> HttpResponse:
    """The queue: ``runs`` (run ids; none: the latest finished run of each branch), ``mine``
    (only the failures given to me), ``page``."""
    project = selectors.project_get(project_id=project_id)
    run_ids = int_list_param(request, "runs", most=MOST_RUNS)
    mine = flag_param(request, "mine")
    queue = queue_get(project_id=project.pk, run_ids=run_ids, user=request.user, mine=mine,
                      page=page_param(request, "page"))  # fmt: skip
    can = user_can(user=request.user, project_id=project.pk, needed=Role.REVIEWER)
    context = {
        "project": project,
        "queue": queue,
        "rows": queue_rows(queue.items),
        "can_review": can,
        "mine": mine,
        "chosen_ids": {run.pk for run in queue.runs},
        "runs_value": ",".join(str(run.pk) for run in queue.runs),
        "assignees": review_assignees(project_id=project.pk) if can else [],
        "controls": _controls(queue.categories) if can else "",
        "errors": {},
        "page_query": _page_query(run_ids, mine),
    }
    return render(request, "runs/review_queue.html", context)


def _controls(categories: list[CategoryChoice]) -> str:
    """A triage form's fields (its verdicts, note and category buttons), the same in every item
    of the queue: drawn once (the template engine would spend most of a page's time on them)."""
    context = {"verdicts": HumanVerdict.choices(), "categories": categories}
    return render_to_string("runs/review_queue.html#controls", context)


def _page_query(run_ids: list[int], mine: bool) -> str:
    """The queue's parameters but its page, as a query-string prefix ("runs=1,2&mine=1&")."""
    params = {"runs": ",".join(map(str, run_ids))} if run_ids else {}
    if mine:
        params["mine"] = "1"
    return f"{urlencode(params)}&" if params else ""


def _queue_runs(request: HttpRequest) -> list[int]:
    """The runs of the queue a post came from (its form's ``queue_runs``), for its progress."""
    raw = request.POST.get("queue_runs", "")
    ids = [part for part in raw.split(",") if part]
    if len(ids) > MOST_RUNS or not all(p.isascii() and p.isdigit() and len(p) < 19 for p in ids):
        raise BadParam("queue_runs", "queue_runs takes run ids, comma-separated")
    return [int(part) for part in ids]


def _item_response(
    request: HttpRequest,
    turn: TurnRow,
    *,
    status: int = 200,
    errors: dict[str, str] | None = None,
) -> HttpResponse:
    """The failure's item drawn again, and the queue's progress (out of band)."""
    project_id = int(turn.case.run.project_id or 0)
    can = user_can(user=request.user, project_id=project_id, needed=Role.REVIEWER)
    row = queue_rows(queue_items(project_id=project_id, turns=[turn]))[0]
    run_ids = _queue_runs(request)
    context = {
        "row": row,
        "can_review": can,
        "errors": errors or {},
        "progress": queue_progress(run_ids=run_ids) if run_ids else None,
        "runs_value": ",".join(map(str, run_ids)),
        "assignees": review_assignees(project_id=project_id) if can else [],
        "controls": _controls(project_categories(project_id=project_id)) if can else "",
    }
    return render(request, ITEM, context, status=status)


def _answer(request: HtmxHttpRequest, turn: TurnRow, **more: Any) -> HttpResponse:
    """The item (htmx), else back to the queue."""
    if request.htmx:
        return _item_response(request, turn, **more)
    url = reverse("review_queue", args=[turn.case.run.project_id])
    return HttpResponseRedirect(f"{url}#queue-turn-{turn.pk}")


def _target(request: HttpRequest, project_id: int, turn_id: int) -> TurnRow | HttpResponse:
    """The turn a post acts on, or the 403 of a user who may not review in the project."""
    turn = project_turn_get(project_id=project_id, turn_id=turn_id)
    if not user_can(user=request.user, project_id=project_id, needed=Role.REVIEWER):
        return _item_response(request, turn, status=403, errors={"role": refusal(project_id)})
    return turn


@login_required
@require_POST
def queue_triage(request: HtmxHttpRequest, project_id: int, turn_id: int) -> HttpResponse:
    """Triage one failure: its verdict, a category, a note (what the item's form posts)."""
    turn = _target(request, project_id, turn_id)
    if isinstance(turn, HttpResponse):
        return turn
    own = queue_items(project_id=project_id, turns=[turn])[0].review
    data = review_input(request, assignee_id=own.assignee_id if own else None)
    try:
        review_save(user=request.user, case=turn.case, turn=turn, data=data)
    except ReviewError as refused:
        return _item_response(request, turn, status=400, errors={refused.field: str(refused)})
    return _answer(request, turn)


@login_required
@require_POST
def queue_confirm(request: HtmxHttpRequest, project_id: int, turn_id: int) -> HttpResponse:
    """Confirm for its run the review the failure carries from an earlier run (``earlier``)."""
    turn = _target(request, project_id, turn_id)
    if isinstance(turn, HttpResponse):
        return turn
    carried = carried_named(turn, request)
    if isinstance(carried, str):
        return _item_response(request, turn, status=400, errors={"carried": carried})
    try:
        review_confirm(user=request.user, case=turn.case, turn=turn, earlier=carried.review)
    except ReviewError as refused:
        return _item_response(request, turn, status=400, errors={"carried": str(refused)})
    return _answer(request, turn)


@login_required
@require_POST
def queue_assign(request: HtmxHttpRequest, project_id: int, turn_id: int) -> HttpResponse:
    """Give the failure to a reviewer of the project (``assignee``: a user id; "": nobody)."""
    turn = _target(request, project_id, turn_id)
    if isinstance(turn, HttpResponse):
        return turn
    raw = request.POST.get("assignee", "").strip()
    allowed = {user.pk for user in review_assignees(project_id=project_id)}
    assignee = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else None
    if raw and assignee not in allowed:
        message = "a failure is given to a reviewer of this project (or to staff)"
        return _item_response(request, turn, status=400, errors={"assignee": message})
    try:
        review_assign(user=request.user, case=turn.case, turn=turn, assignee_id=assignee)
    except ReviewError as refused:
        return _item_response(request, turn, status=400, errors={"assignee": str(refused)})
    return _answer(request, turn)

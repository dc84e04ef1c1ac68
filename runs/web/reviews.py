"""Reviews on the pages: the review panel of each failing turn (on the run page's expanded
rows and on the case page) and of the case itself, the posts that write them (a review,
confirming or reopening the review a turn carries from an earlier run), and the run page's
review tile.

A panel shows the machine's verdict and the person's side by side — a review never changes the
machine's — with who and when, every change under it, and a review carried from an earlier run
as known (confirm it, or reopen it), about another failure, or stale (never as current). Its
form is for the project's reviewers (and staff); everyone else reads it. Each post answers
with the panel again (htmx swaps it): 400 with the message at its field when the review is
refused, 403 with what is missing when the user may not review.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import HumanVerdict, Role
from runs.core.verdicts.outcomes import CaseState, Outcome
from runs.selectors.access import user_can
from runs.selectors.review_panels import (
    DISAGREES,
    UNTRIAGED,
    CaseReviews,
    HistoryChange,
    case_own_review,
    case_reviews,
    earlier_review,
    is_failing,
    review_case_get,
    review_turn_get,
    turn_reviews,
)
from runs.selectors.reviews import Carried, CategoryChoice, is_triaged, run_review_tally
from runs.services.reviews import (
    ReviewError,
    ReviewInput,
    review_confirm,
    review_reopen,
    review_save,
)
from runs.web.views import HtmxHttpRequest

if TYPE_CHECKING:
    from runs.models import CaseRow, Run, TurnRow
    from runs.review_models import Review

PANEL = "runs/_review_panel.html#panel"
# The event a saved review raises on the page (``HX-Trigger``): the review tile listens.
SAVED = "review-saved"
# A case not settled yet shows no panel: its fragment is drawn again as its turns come.
UNSETTLED = (CaseState.PENDING, CaseState.RUNNING)
ALONE = "runs/_review_page.html"


def refusal(project_id: int | None) -> str:
    """Why a user may not review in the project (a 403's message)."""
    if project_id is None:
        return "Only staff can review a run that belongs to no project."
    return (
        "Reviewing needs the reviewer role (or runner, or admin) in this project: ask one of its"
        " admins for it."
    )


@dataclass(frozen=True)
class ReviewPanel:
    """One review panel: of ``turn`` of ``case``, or of the case itself (no turn)."""

    case: CaseRow
    turn: TurnRow | None
    review: Review | None
    carried: Carried | None
    history: list[HistoryChange]
    categories: list[CategoryChoice]
    can_review: bool
    errors: dict[str, str] = field(default_factory=dict)
    posted: dict[str, str] = field(default_factory=dict)  # a refused form's values, to fix

    @property
    def run(self) -> Run:
        return self.case.run

    @property
    def dom_id(self) -> str:
        return (
            f"review-turn-{self.turn.pk}"
            if self.turn is not None
            else f"review-case-{self.case.pk}"
        )

    @property
    def machine(self) -> Outcome:
        outcome = self.turn.outcome if self.turn is not None else self.case.outcome
        return Outcome.of(outcome)

    @property
    def triaged(self) -> bool:
        return self.review is not None and is_triaged(self.review)

    @property
    def human(self) -> HumanVerdict | None:
        if self.review is None or not self.review.verdict:
            return None
        return HumanVerdict(self.review.verdict)

    @property
    def disagrees(self) -> bool:
        return self.human in (HumanVerdict.SHOULD_PASS, HumanVerdict.SHOULD_FAIL)

    @property
    def verdicts(self) -> list[tuple[str, str]]:
        return HumanVerdict.choices()

    @property
    def chosen(self) -> dict[str, str]:
        """What the form shows: the values refused, else the review's, else a fresh one's."""
        if self.posted:
            return self.posted
        review = self.review
        if review is None or review.reopened:
            return {"verdict": HumanVerdict.AGREES.value, "category": "", "note": "", "link": ""}
        return {
            "verdict": review.verdict or HumanVerdict.AGREES.value,
            "category": review.category.name if review.category else "",
            "note": review.note,
            "link": review.link,
        }

    @property
    def form_open(self) -> bool:
        """The form starts open on a failing turn nobody triaged (a case's own review, asked for
        less often, starts closed above its turns), or to fix what was refused."""
        return bool(self.errors) or (self.turn is not None and not self.triaged)

    @property
    def offers_carried(self) -> bool:
        """The carried review is shown (it is not when this run's own review triages it)."""
        return self.carried is not None and not self.triaged

    @property
    def post_url(self) -> str:
        if self.turn is None:
            return reverse("case_review", args=[self.case.run_id, self.case.pk])
        return reverse("turn_review", args=[self.case.run_id, self.case.pk, self.turn.pk])

    @property
    def confirm_url(self) -> str:
        assert self.turn is not None
        return reverse("turn_review_confirm", args=[self.case.run_id, self.case.pk, self.turn.pk])

    @property
    def reopen_url(self) -> str:
        assert self.turn is not None
        return reverse("turn_review_reopen", args=[self.case.run_id, self.case.pk, self.turn.pk])


def _panel(
    case: CaseRow, turn: TurnRow | None, found: CaseReviews, can: bool, **more: Any
) -> ReviewPanel:
    review = found.case_review if turn is None else found.own.get(turn.pk)
    carried = found.carried.get(turn.pk) if turn is not None else None
    history = found.history.get(review.pk, []) if review is not None else []
    return ReviewPanel(case, turn, review, carried, history, found.categories, can, **more)


def case_panels(*, user: Any, case: CaseRow) -> dict[str, Any]:
    """The case fragment's review panels (``review_panels``: by turn id, for each failing turn;
    ``case_panel``: the case's own): none while the case runs (its fragment is redrawn as
    turns come) or when its run belongs to no project."""
    if CaseState(case.status) in UNSETTLED or case.run.project_id is None:
        return {"review_panels": {}, "case_panel": None}
    turns = list(case.turns.all())
    can = user_can(user=user, project_id=case.run.project_id, needed=Role.REVIEWER)
    found = case_reviews(case=case, turns=turns, categories=can)
    panels = {turn.pk: _panel(case, turn, found, can) for turn in turns if is_failing(turn)}
    return {"review_panels": panels, "case_panel": _panel(case, None, found, can)}


# --- the posts ------------------------------------------------------------------------------


def _may_review(request: HttpRequest, project_id: int | None) -> bool:
    return user_can(user=request.user, project_id=project_id, needed=Role.REVIEWER)


def review_input(request: HttpRequest, *, assignee_id: int | None) -> ReviewInput:
    """What a review form posted."""
    post = request.POST
    return ReviewInput(
        verdict=post.get("verdict", "").strip(),
        category=post.get("category", ""),
        note=post.get("note", ""),
        link=post.get("link", ""),
        assignee_id=assignee_id,
    )


def _posted(request: HttpRequest) -> dict[str, str]:
    return {name: request.POST.get(name, "") for name in ("verdict", "category", "note", "link")}


def _answer(
    request: HtmxHttpRequest, panel: ReviewPanel, *, status: int = 200, anchor: str = ""
) -> HttpResponse:
    """The panel (htmx), else back to the case page where it is (or, refused, the panel on a
    page of its own with what is wrong)."""
    if request.htmx:
        response = render(request, PANEL, {"panel": panel}, status=status)
        if status == 200:  # the run page's review tile counts again (_review_tile.html)
            response["HX-Trigger"] = SAVED
        return response
    if status == 200:
        url = reverse("case_detail", args=[panel.case.run_id, panel.case.pk])
        return HttpResponseRedirect(f"{url}#{anchor or panel.dom_id}")
    return render(request, ALONE, {"panel": panel, "run": panel.run, "case": panel.case},
                  status=status)  # fmt: skip


def _refused(request: HtmxHttpRequest, panel: ReviewPanel) -> HttpResponse:
    message = refusal(panel.run.project_id)
    if not request.htmx:
        raise PermissionDenied(message)
    return _answer(request, _with(panel, errors={"role": message}, can_review=False), status=403)


def _with(panel: ReviewPanel, **changes: Any) -> ReviewPanel:
    return replace(panel, **changes)


def _turn_panel(turn: TurnRow, can: bool, **more: Any) -> ReviewPanel:
    return _panel(turn.case, turn, turn_reviews(turn=turn), can, **more)


@login_required
@require_POST
def turn_review(request: HtmxHttpRequest, run_id: int, case_id: int, turn_id: int) -> HttpResponse:
    """Save the review of one turn: a verdict, a triage category, a note, a link."""
    turn = review_turn_get(run_id=run_id, case_id=case_id, turn_id=turn_id)
    can = _may_review(request, turn.case.run.project_id)
    panel = _turn_panel(turn, can)
    if not can:
        return _refused(request, panel)
    assignee = panel.review.assignee_id if panel.review is not None else None
    try:
        review_save(user=request.user, case=turn.case, turn=turn,
                    data=review_input(request, assignee_id=assignee))  # fmt: skip
    except ReviewError as refused:
        errors = {refused.field: str(refused)}
        return _answer(request, _with(panel, errors=errors, posted=_posted(request)), status=400)
    return _answer(request, _turn_panel(turn, can))


def carried_named(turn: TurnRow, request: HttpRequest) -> Carried | str:
    """The earlier review the form names (``earlier``), when the turn carries it as known;
    else what is wrong."""
    raw = request.POST.get("earlier", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return "say which earlier review (its id)"
    carried = earlier_review(turn=turn, review_id=int(raw))
    if carried is None:
        return "this turn no longer carries that review: reload the page"
    if not carried.is_known:
        return "only a review of the same failure of the same turn can be confirmed or reopened"
    return carried


def _act_on_carried(request: HtmxHttpRequest, run_id: int, case_id: int, turn_id: int,
                    act: Any) -> HttpResponse:  # fmt: skip
    turn = review_turn_get(run_id=run_id, case_id=case_id, turn_id=turn_id)
    can = _may_review(request, turn.case.run.project_id)
    if not can:
        return _refused(request, _turn_panel(turn, can))
    carried = carried_named(turn, request)
    if isinstance(carried, str):
        return _answer(request, _turn_panel(turn, can, errors={"carried": carried}), status=400)
    try:
        act(user=request.user, case=turn.case, turn=turn, earlier=carried.review)
    except ReviewError as refused:
        errors = {"carried": str(refused)}
        return _answer(request, _turn_panel(turn, can, errors=errors), status=400)
    return _answer(request, _turn_panel(turn, can))


@login_required
@require_POST
def turn_review_confirm(
    request: HtmxHttpRequest, run_id: int, case_id: int, turn_id: int
) -> HttpResponse:
    """Confirm for this run the review the turn carries from an earlier run (``earlier``)."""
    return _act_on_carried(request, run_id, case_id, turn_id, review_confirm)


@login_required
@require_POST
def turn_review_reopen(
    request: HtmxHttpRequest, run_id: int, case_id: int, turn_id: int
) -> HttpResponse:
    """The review the turn carries (``earlier``) does not hold here: triage it again."""
    return _act_on_carried(request, run_id, case_id, turn_id, review_reopen)


@login_required
@require_POST
def case_review(request: HtmxHttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """Save the review of a case itself (not of one of its turns)."""
    case = review_case_get(run_id=run_id, case_id=case_id)
    can = _may_review(request, case.run.project_id)
    panel = _panel(case, None, case_own_review(case=case), can)
    if not can:
        return _refused(request, panel)
    assignee = panel.review.assignee_id if panel.review is not None else None
    try:
        review_save(user=request.user, case=case, turn=None,
                    data=review_input(request, assignee_id=assignee))  # fmt: skip
    except ReviewError as refused:
        errors = {refused.field: str(refused)}
        return _answer(request, _with(panel, errors=errors, posted=_posted(request)), status=400)
    return _answer(request, _panel(case, None, case_own_review(case=case), can))


# --- the run page's tile --------------------------------------------------------------------


@login_required
@require_GET
def run_review_tile(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's review state in counts, all of them from people's reviews (the run page loads
    it once the page is drawn: three queries over the run's failing turns)."""
    run = selectors.run_row(
        run_id=run_id,
        only=("id", "project_id", "status", "summary", "cases_done", "total_cases"),
    )
    tally = run_review_tally(run=run) if run.project_id is not None else None
    base = reverse("run_detail", args=[run.pk])
    context = {
        "run": run,
        "tally": tally,
        "untriaged_url": f"{base}?review={UNTRIAGED}",
        "disagrees_url": f"{base}?review={DISAGREES}",
    }
    return render(request, "runs/_review_tile.html#tile", context)

"""Writes of what people conclude: a review of a turn or a case (every change kept, each one in
the audit log), a carried review confirmed on a later run or reopened there, a project's triage
categories, and the roles users hold in projects.

Permission is the caller's to check (``runs.selectors.access.user_can``); a service only writes
what it was asked. A review never touches the machine's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.core.reviewing.vocabulary import DEFAULT_CATEGORIES, HumanVerdict, Role
from runs.models import CaseRow, TurnRow
from runs.review_models import ProjectRole, Review, ReviewChange, TriageCategory
from runs.services.audit import audit_write

MAX_NOTE = 20_000
MAX_CATEGORY = 80


class ReviewError(Exception):
    """A review, category or role that cannot be saved, with the field it is about."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ReviewInput:
    """What a reviewer sends: a verdict (a ``HumanVerdict`` value), a triage category (its
    name, "" for none), a Markdown note, a link (http or https, "" for none), an assignee."""

    verdict: str
    category: str = ""
    note: str = ""
    link: str = ""
    assignee_id: int | None = None


def review_save(
    *,
    user: Any,
    case: CaseRow,
    turn: TurnRow | None,
    data: ReviewInput,
    carried_from: Review | None = None,
) -> Review:
    """Create or change the review of ``turn`` (or of ``case`` itself, without a turn)."""
    project_id = _project_of(case)
    verdict = _verdict(data.verdict)
    note = _note(data.note)
    link = _link(data.link)
    with transaction.atomic():
        category = category_named(project_id=project_id, name=data.category)
        review = _review_of(case, turn)
        before = review_fields(review) if review.pk else None
        review.verdict, review.note, review.link = verdict.value, note, link
        review.category, review.assignee_id, review.reopened = category, data.assignee_id, False
        if carried_from is not None:
            review.carried_from = carried_from
        _stamp(review, user)
        return _saved(review, user, before, "review.save")


def review_confirm(*, user: Any, case: CaseRow, turn: TurnRow, earlier: Review) -> Review:
    """An earlier run's review of the same turn, confirmed for this run: the same verdict,
    category, note and link, linked to it; this turn keeps whom it is assigned to."""
    assigned = Review.objects.filter(case=case, turn=turn).values_list("assignee_id", flat=True)
    data = ReviewInput(
        verdict=earlier.verdict or HumanVerdict.AGREES.value,
        category=earlier.category.name if earlier.category else "",
        note=earlier.note,
        link=earlier.link,
        assignee_id=assigned.first(),
    )
    return review_save(user=user, case=case, turn=turn, data=data, carried_from=earlier)


def review_reopen(*, user: Any, case: CaseRow, turn: TurnRow, earlier: Review) -> Review:
    """The earlier review does not hold on this run: the failure is to be triaged again."""
    with transaction.atomic():
        review = _review_of(case, turn)
        before = review_fields(review) if review.pk else None
        review.verdict, review.category, review.note, review.link = "", None, "", ""
        review.reopened, review.carried_from = True, earlier
        _stamp(review, user)
        return _saved(review, user, before, "review.reopen")


def review_fields(review: Review) -> dict[str, Any]:
    """What a change and the audit log keep of a review."""
    return {
        "verdict": review.verdict,
        "category": review.category.name if review.category_id and review.category else "",
        "note": review.note,
        "link": review.link,
        "assignee": review.assignee_id,
        "reopened": review.reopened,
        "carried_from": review.carried_from_id,
    }


def _review_of(case: CaseRow, turn: TurnRow | None) -> Review:
    """The stored review of the turn (or case), locked, or a new one for it."""
    found = Review.objects.select_for_update().filter(
        case=case, turn=turn, **({} if turn is not None else {"turn__isnull": True})
    )
    review = found.first()
    if review is not None:
        return review
    return Review(
        project_id=case.run.project_id,
        run_id=case.run_id,
        case=case,
        turn=turn,
        turn_key=turn.turn_key if turn is not None else "",
        definition=turn.definition if turn is not None else "",
        failure=turn.failure if turn is not None else "",
        machine_outcome=(turn.outcome if turn is not None else case.outcome) or "",
    )


def _stamp(review: Review, user: Any) -> None:
    now = timezone.now()
    if review.pk is None:
        review.created_by, review.created_at = user, now
    review.updated_by, review.updated_at = user, now


def _saved(review: Review, user: Any, before: dict[str, Any] | None, action: str) -> Review:
    try:
        with transaction.atomic():
            review.save()
    except IntegrityError:  # a review of this turn saved meanwhile by another request
        raise ReviewError(
            "turn", "this turn was reviewed meanwhile: reload and try again"
        ) from None
    after = review_fields(review)
    ReviewChange.objects.create(review=review, by=user, before=before or {}, after=after)
    audit_write(user=user, action=action, object_type="review", object_id=review.pk,
                project_id=review.project_id, before=before, after=after)  # fmt: skip
    return review


def _project_of(case: CaseRow) -> int:
    project_id = case.run.project_id
    if project_id is None:
        raise ReviewError("run", "this run belongs to no project: register its project first")
    return int(project_id)


def _verdict(value: str) -> HumanVerdict:
    try:
        return HumanVerdict(value)
    except ValueError:
        words = ", ".join(v.value for v in HumanVerdict)
        raise ReviewError("verdict", f"say what the verdict should be: one of {words}") from None


def _note(text: str) -> str:
    if len(text) > MAX_NOTE:
        raise ReviewError("note", f"a note holds at most {MAX_NOTE:,} characters")
    return text.replace("\r\n", "\n")


def _link(text: str) -> str:
    link = text.strip()
    if link and not link.lower().startswith(("http://", "https://")):
        raise ReviewError("link", "a link starts with http:// or https://")
    if len(link) > 500:
        raise ReviewError("link", "a link holds at most 500 characters")
    return link


# --- triage categories -------------------------------------------------------------------------


def categories_ensure(*, project_id: int) -> list[TriageCategory]:
    """The project's categories, the default ones created when it has none (a write: never on
    a GET; the pages show ``runs.selectors.reviews.project_categories`` until then)."""
    stored = list(TriageCategory.objects.filter(project_id=project_id))
    if stored:
        return stored
    for position, (name, key) in enumerate(DEFAULT_CATEGORIES):
        TriageCategory.objects.get_or_create(
            project_id=project_id, name=name, defaults={"key": key, "position": position}
        )
    return list(TriageCategory.objects.filter(project_id=project_id))


def category_named(*, project_id: int, name: str) -> TriageCategory | None:
    """The project's category called ``name`` (None for ""); an unknown name is refused."""
    name = name.strip()
    if not name:
        return None
    for category in categories_ensure(project_id=project_id):
        if category.name == name and not category.archived:
            return category
    raise ReviewError("category", f"no triage category {name!r} in this project")


def category_save(
    *,
    user: Any,
    project_id: int,
    name: str,
    key: str = "",
    archived: bool = False,
    category_id: int | None = None,
) -> TriageCategory:
    """Add a category to the project, or rename, re-key or archive one of its own."""
    name = " ".join(name.split())
    if not name or len(name) > MAX_CATEGORY:
        raise ReviewError("name", f"a category's name is 1 to {MAX_CATEGORY} characters")
    if len(key) > 1:
        raise ReviewError("key", "a category's key is one character")
    with transaction.atomic():
        categories_ensure(project_id=project_id)
        if category_id is None:
            category = TriageCategory(project_id=project_id,
                                      position=TriageCategory.objects.filter(
                                          project_id=project_id).count())  # fmt: skip
            before = None
        else:
            category = TriageCategory.objects.get(pk=category_id, project_id=project_id)
            before = _category_fields(category)
        category.name, category.key, category.archived = name, key, archived
        try:
            with transaction.atomic():
                category.save()
        except IntegrityError:
            raise ReviewError("name", f"this project has a category {name!r} already") from None
        audit_write(user=user, action="category.save", object_type="triage_category",
                    object_id=category.pk, project_id=project_id, before=before,
                    after=_category_fields(category))  # fmt: skip
        return category


def _category_fields(category: TriageCategory) -> dict[str, Any]:
    return {"name": category.name, "key": category.key, "archived": category.archived}


# --- roles ------------------------------------------------------------------------------------


def role_set(*, by: Any, project_id: int, user_id: int, role: str) -> ProjectRole | None:
    """Give ``user_id`` the role in the project ("" takes their role away: a viewer again)."""
    if role and role not in {r.value for r in Role}:
        raise ReviewError("role", f"a role is one of {', '.join(r.value for r in Role)}")
    with transaction.atomic():
        found = ProjectRole.objects.select_for_update().filter(
            project_id=project_id, user_id=user_id
        )
        current = found.first()
        before = {"user": user_id, "role": current.role} if current else None
        if not role:
            found.delete()
            saved = None
        else:
            saved, _ = ProjectRole.objects.update_or_create(
                project_id=project_id, user_id=user_id, defaults={"role": role}
            )
        after = {"user": user_id, "role": role} if role else None
        if before != after:
            audit_write(user=by, action="role.set", object_type="project_role",
                        object_id=user_id, project_id=project_id, before=before,
                        after=after)  # fmt: skip
        return saved


# --- assignment (the review queue's) ----------------------------------------------------------


def review_assign(
    *, user: Any, case: CaseRow, turn: TurnRow | None, assignee_id: int | None
) -> Review:
    """Give the review of ``turn`` (or of ``case`` itself) to a user to triage (None: to
    nobody); its verdict, category and note stay as they are, so a turn nobody triaged stays
    untriaged."""
    _project_of(case)
    with transaction.atomic():
        review = _review_of(case, turn)
        before = review_fields(review) if review.pk else None
        review.assignee_id = assignee_id
        _stamp(review, user)
        return _saved(review, user, before, "review.assign")

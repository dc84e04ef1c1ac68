"""An imported result file's reviews (``TestReport.reviews``, ``runs.core.wire.reviews``) recreated
on the imported run's turns, in the import's transaction: the categories by name in the target
project (a name it lacks is added to it), who made each review as the file said (kept on its
first change, never taken for this dashboard's user of that name), and one audit entry for the
import.

Bulk inserts: a fixed number of queries whatever the number of reviews.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from runs.core.wire.reviews import IMPORTED_BY, ReviewWire
from runs.models import CaseRow, Run, TurnRow
from runs.review_models import Review, ReviewChange, TriageCategory
from runs.services.audit import audit_write
from runs.services.reviews import categories_ensure, review_fields


def reviews_import(*, run: Run, reviews: Sequence[ReviewWire], user: Any = None) -> list[Review]:
    """Recreate ``reviews`` on ``run`` (just imported, in a project); the import's audit entry
    says how many and which categories it added to the project."""
    if not reviews or run.project_id is None:
        return []
    categories, added = _categories(int(run.project_id), reviews)
    cases = {case.index: case for case in CaseRow.objects.filter(run=run)}
    turns = {(turn.case_id, turn.index): turn for turn in TurnRow.objects.filter(run=run)}
    now = timezone.now()
    rows = []
    for review in reviews:
        case = cases[review.result_index]
        turn = turns.get((case.pk, review.turn_index)) if review.turn_index is not None else None
        rows.append(_review_row(run, case, turn, review, categories, now))
    created = Review.objects.bulk_create(rows)
    if not all(row.pk for row in created):  # a backend without RETURNING on bulk insert
        stored = {(r.case_id, r.turn_id): r for r in Review.objects.filter(run=run)}
        created = [stored[(row.case_id, row.turn_id)] for row in created]
    ReviewChange.objects.bulk_create(
        ReviewChange(review=row, by=_signed_in(user), at=now, before={},
                     after={**review_fields(row), IMPORTED_BY: wired.by,
                            "imported_at": wired.at.isoformat() if wired.at else None})
        for row, wired in zip(created, reviews, strict=True)
    )  # fmt: skip
    audit_write(
        user=user, action="review.import", object_type="run", object_id=run.pk,
        project_id=run.project_id, before=None,
        after={"reviews": len(created), "categories_added": added},
    )  # fmt: skip
    return created


def _review_row(
    run: Run,
    case: CaseRow,
    turn: TurnRow | None,
    wired: ReviewWire,
    categories: dict[str, TriageCategory],
    now: Any,
) -> Review:
    at = wired.at or now
    return Review(
        project_id=run.project_id,
        run=run,
        case=case,
        turn=turn,
        turn_key=wired.turn_key or (turn.turn_key if turn else ""),
        definition=wired.definition or (turn.definition if turn else ""),
        failure=wired.failure or (turn.failure if turn else ""),
        machine_outcome=wired.machine_outcome or ((turn or case).outcome or ""),
        verdict=wired.verdict.value if wired.verdict else "",
        category=categories[_name(wired.category)] if _name(wired.category) else None,
        note=wired.note.replace("\r\n", "\n"),
        link=wired.link.strip(),
        reopened=wired.reopened,
        created_at=at,
        updated_at=at,
    )


def _categories(
    project_id: int, reviews: Sequence[ReviewWire]
) -> tuple[dict[str, TriageCategory], list[str]]:
    """The project's categories by name, with the ones the reviews name and it lacked added
    (after its own, without a key)."""
    stored = {category.name: category for category in categories_ensure(project_id=project_id)}
    wanted = dict.fromkeys(_name(review.category) for review in reviews if _name(review.category))
    missing = [name for name in wanted if name not in stored]
    for position, name in enumerate(missing, start=len(stored)):
        stored[name] = TriageCategory.objects.create(
            project_id=project_id, name=name, position=position
        )
    return stored, missing


def _name(category: str | None) -> str:
    return " ".join((category or "").split())


def _signed_in(user: Any) -> Any:
    return user if user is not None and user.is_authenticated else None

"""What people concluded about a run's turns, as our exports carry it (``TestReport.reviews``,
left out of a HoloDeck-shaped dump: HoloDeck readers never see it).

A review names the result it is about by its place in ``report.results`` (``result_index``),
which an import keeps, and says which case, repetition and turn that was in the run it was made
on; ``turn_key``, ``definition`` and ``failure`` are the turn's identity across runs
(``runs.core.reviewing.identity``) when it was reviewed. A review of a case itself has no turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runs.core.reviewing.vocabulary import HumanVerdict

# The key of an imported review's first change (``ReviewChange.after``) that keeps who made it
# as the file said: the file's name for a person is not this dashboard's user of that name.
IMPORTED_BY = "imported_by"


class ReviewWire(BaseModel):
    """One review of a turn (or of a case) of the run."""

    model_config = ConfigDict(extra="forbid")

    result_index: int = Field(ge=0, description="its result's position in report.results")
    test_name: str | None = None
    case_index: int = Field(ge=0, description="the case's index in the run it was made on")
    repetition: int = Field(default=0, ge=0)
    turn_index: int | None = Field(
        default=None, ge=0, description="the turn (0-based, as turn_index); null: the case"
    )
    turn_key: str = Field(default="", max_length=32)
    definition: str = Field(default="", max_length=32)
    failure: str = Field(default="", max_length=32)
    machine_outcome: str = Field(default="", max_length=16)
    # "" for a review reopened on this run (a carried review that did not hold here).
    verdict: HumanVerdict | None = None
    category: str | None = Field(default=None, max_length=80)
    note: str = Field(default="", max_length=20_000)
    link: str = Field(default="", max_length=500)
    reopened: bool = False
    by: str = Field(default="", max_length=150, description="who last changed it")
    at: datetime | None = Field(default=None, description="when it was last changed")

    @field_validator("link")
    @classmethod
    def _web_link(cls, link: str) -> str:
        # Shown as a link on the pages: never a javascript: or data: address.
        if link.strip() and not link.strip().lower().startswith(("http://", "https://")):
            raise ValueError("a review's link starts with http:// or https://")
        return link


def review_place_problems(reviews: Sequence[ReviewWire], turn_counts: Sequence[int]) -> list[str]:
    """The reviews naming a result or a turn the report does not have (``turn_counts``: each
    result's number of turns, 1 for a single-turn result), or one reviewed twice."""
    problems = []
    seen: set[tuple[int, int | None]] = set()
    for position, review in enumerate(reviews):
        where, result, turn = f"reviews[{position}]", review.result_index, review.turn_index
        if result >= len(turn_counts):
            problems.append(f"{where}: result_index {result} is no result's")
        elif turn is not None and turn >= turn_counts[result]:
            problems.append(f"{where}: result {result} has no turn_index {turn}")
        elif (result, turn) in seen:
            problems.append(f"{where}: a second review of result {result}, turn_index {turn}")
        seen.add((result, turn))
    return problems

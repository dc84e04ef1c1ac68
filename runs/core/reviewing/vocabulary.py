"""The words of a review: a person's verdict on the machine's, the default triage categories,
and the roles a user can hold in a project.

A review never changes the machine's verdict: both are kept and shown side by side, and every
count that uses people's verdicts says so.
"""

from __future__ import annotations

from enum import StrEnum


class HumanVerdict(StrEnum):
    """A reviewer's verdict on the machine's verdict of a turn (or a case)."""

    AGREES = "agrees"
    SHOULD_PASS = "should_pass"
    SHOULD_FAIL = "should_fail"
    UNSURE = "unsure"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        return [(verdict.value, verdict.label) for verdict in cls]

    def human_passed(self, machine_passed: bool) -> bool | None:
        """What the person says the verdict should be (None: could not tell)."""
        if self is HumanVerdict.AGREES:
            return machine_passed
        if self is HumanVerdict.UNSURE:
            return None
        return self is HumanVerdict.SHOULD_PASS


_LABELS = {
    HumanVerdict.AGREES: "agrees with the machine",
    HumanVerdict.SHOULD_PASS: "should have passed",
    HumanVerdict.SHOULD_FAIL: "should have failed",
    HumanVerdict.UNSURE: "could not tell",
}

# A new project's triage categories (editable per project), in this order, each with the key
# that picks it in the review queue.
DEFAULT_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("agent bug", "a"),
    ("ground truth wrong", "g"),
    ("grader wrong", "r"),
    ("flaky or infrastructure", "f"),
    ("accepted", "c"),
)


class Role(StrEnum):
    """What a user may do in a project, each role every right of the ones before it: read;
    review (verdicts, triage, notes); run (launch, cancel, re-run, re-grade); administer
    (register, edit, delete the project, its categories and roles). Staff hold every right in
    every project; a signed-in user without a role in a project is its viewer."""

    VIEWER = "viewer"
    REVIEWER = "reviewer"
    RUNNER = "runner"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        return [(role.value, role.value) for role in cls]

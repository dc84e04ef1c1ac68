"""The rows of what people conclude: reviews of turns and cases (with every change kept), the
triage categories of a project, the roles users hold in projects, and the audit log of every
write of a review, a role, a category or a project.

Loaded by ``runs.models`` (the app's models module); they name the run's rows by string, so
this module imports none of them.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.core.reviewing.vocabulary import HumanVerdict, Role


class TriageCategory(models.Model):
    """A project's triage category ("ground truth wrong"), with the key that picks it in the
    review queue; archived ones are kept for the reviews that use them."""

    project = models.ForeignKey(
        "runs.AgentProject", on_delete=models.CASCADE, related_name="triage_categories"
    )
    name = models.CharField(max_length=80)
    key = models.CharField(max_length=1, blank=True)
    position = models.IntegerField(default=0)
    archived = models.BooleanField(default=False)

    class Meta:
        ordering = ["project", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="triage_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class ProjectRole(models.Model):
    """A user's role in a project (``runs.core.reviewing.vocabulary.Role``)."""

    project = models.ForeignKey("runs.AgentProject", on_delete=models.CASCADE, related_name="roles")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="project_roles"
    )
    role = models.CharField(max_length=16, choices=Role.choices())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="role_unique_user")]

    def __str__(self) -> str:
        return f"{self.user_id} is {self.role} of {self.project_id}"


class Review(models.Model):
    """A person's review of one turn (or, with no turn, of one case) of one run: their verdict
    on the machine's, a triage category, a Markdown note, a link. The turn's identity
    (``runs.core.reviewing.identity``) lets later runs find it: ``turn_key`` where it is,
    ``definition`` what it was, ``failure`` how it failed. ``carried_from``: the earlier review
    this one confirmed on a later run."""

    project = models.ForeignKey(
        "runs.AgentProject", null=True, blank=True, on_delete=models.CASCADE,
        related_name="reviews",
    )  # fmt: skip
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="reviews")
    case = models.ForeignKey("runs.CaseRow", on_delete=models.CASCADE, related_name="reviews")
    turn = models.ForeignKey(
        "runs.TurnRow", null=True, blank=True, on_delete=models.CASCADE,
        related_name="reviews",
    )  # fmt: skip
    turn_key = models.CharField(max_length=32, blank=True)
    definition = models.CharField(max_length=32, blank=True)
    failure = models.CharField(max_length=32, blank=True)
    # The machine's verdict when it was reviewed (the turn's or the case's outcome).
    machine_outcome = models.CharField(max_length=16, blank=True)
    verdict = models.CharField(max_length=16, choices=HumanVerdict.choices(), blank=True)
    category = models.ForeignKey(
        TriageCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="reviews"
    )
    note = models.TextField(blank=True)
    link = models.URLField(max_length=500, blank=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="assigned_reviews",
    )  # fmt: skip
    # Reopened on this run: a review carried from an earlier run was not confirmed here, the
    # failure is to be triaged again (no verdict of its own then).
    reopened = models.BooleanField(default=False)
    carried_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried_to"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="reviews"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            # One review per turn of a run, and one per case for the case itself.
            models.UniqueConstraint(
                fields=["turn"], condition=models.Q(turn__isnull=False), name="review_one_per_turn"
            ),
            models.UniqueConstraint(
                fields=["case"], condition=models.Q(turn__isnull=True), name="review_one_per_case"
            ),
        ]
        indexes = [
            # A later run's turns find their earlier reviews by place, newest first.
            models.Index(fields=["project", "turn_key", "-updated_at"], name="review_by_key"),
            models.Index(fields=["run", "turn"], name="review_by_run"),
        ]

    def __str__(self) -> str:
        return f"review {self.pk} of run {self.run_id}"


class ReviewChange(models.Model):
    """One change of a review: who, when, and its fields before and after."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="changes")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(default=timezone.now)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]


class AuditEntry(models.Model):
    """One accepted write of a review, a role, a category or a project: who, what, when, the
    object's fields before and after (refused writes write nothing)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    username = models.CharField(max_length=150, blank=True)  # kept when the user is deleted
    action = models.CharField(max_length=40)  # "review.save", "role.set", "project.edit", ...
    object_type = models.CharField(max_length=40)
    object_id = models.IntegerField(null=True, blank=True)
    project = models.ForeignKey(
        "runs.AgentProject", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.username} {self.action} {self.object_type} {self.object_id}"

"""Django models mirroring the report models (TestReport -> Run, TestResult -> CaseRow,
TurnRow -> TurnRow, MetricRow -> MetricRow).

Lists read the summary columns on ``Run``; turn details are fetched only when a case row is
expanded. Tool invocations, arg-match details and grader details are JSON on the turn row, and
processed files JSON on the case row (each is always read together with its row, so no N+1).
"""

from __future__ import annotations

import uuid
from functools import cached_property
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.case_columns import CompareColumns
from runs.core.agentconfig.test_cases import case_label
from runs.core.runoptions import RunOptions, partial_text, run_launch_options
from runs.core.verdicts.numbers import case_text
from runs.core.verdicts.outcomes import RUN_ACTIVE_STATES, CaseState, Outcome, RunState
from runs.core.verdicts.regrades import RegradeSources
from runs.core.verdicts.status import StatusReason, counters_of, run_status_reason
from runs.core.verdicts.summary import OutcomeCounts


class AgentProject(models.Model):
    """A directory holding an agent.yaml, registered from the dashboard, the admin or
    `register_project`."""

    name = models.CharField(max_length=200, unique=True)
    directory = models.CharField(max_length=1000, help_text="Absolute path of the agent dir")
    agent_file = models.CharField(max_length=200, default="agent.yaml")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def agent_path(self) -> Path:
        return Path(self.directory) / self.agent_file


class AgentSnapshot(models.Model):
    """The files of an agent directory as a run ran them (``runs.core.sealing``): a deterministic
    zip, content-addressed by ``digest``, one row per distinct tree (launches of the same tree
    share it). Never changed once written; workers unpack it into their local cache."""

    digest = models.CharField(max_length=64, unique=True)
    # The zip (PackedSnapshot.to_zip). Up to tens of MB: a query that does not unpack it defers it.
    archive = models.BinaryField()
    # [{path, size, sha256, mode}] sorted by path (Snapshot.manifest), readable without the zip.
    manifest = models.JSONField(default=list)
    file_count = models.IntegerField()
    total_bytes = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"snapshot {self.digest[:12]} ({self.file_count} files)"


class Run(models.Model):
    # The states are the verdict vocabulary's (runs.core.verdicts.outcomes.RunState).
    Status = RunState

    class Source(models.TextChoices):
        DASHBOARD = "dashboard"
        CLI = "cli"
        IMPORT = "import"
        REGRADE = "regrade"

    ACTIVE = RUN_ACTIVE_STATES
    # Not a column: True on a run a repeated idempotency key was answered with instead of a new
    # one (the API's 200, not 201); set by runs.services.launch.run_open_once.
    replayed = False

    # The run's identity across databases: every export carries it (report.environment
    # ENVIRONMENT_KEY), and an import keeps it, so a run exported and imported anywhere it
    # already is is recognised.
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(
        AgentProject, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # A re-grade: this run's transcripts are the original's, graded with another agent.yaml.
    regrade_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="regrades"
    )
    # A re-grade's two sources (runs.core.verdicts.regrades.RegradeSources as JSON; {} otherwise):
    # the run and snapshot its transcripts come from, and the agent.yaml (ref, commit, snapshot) it
    # was graded with. Its git_* fields are its transcripts', never the grading commit's.
    regrade_sources = models.JSONField(default=dict, blank=True)
    # A re-run: some of ``rerun_of``'s cases (one, or its failed ones) run again, at its
    # snapshot (runs.services.rerun).
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    status = models.CharField(max_length=16, choices=RunState.choices(), default=RunState.QUEUED)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.DASHBOARD)
    agent_name = models.CharField(max_length=200)
    agent_config_path = models.CharField(max_length=1000, blank=True)
    git_ref = models.CharField(max_length=200, blank=True)
    git_commit = models.CharField(max_length=64, blank=True, db_index=True)
    git_branch = models.CharField(max_length=200, blank=True)
    git_dirty = models.BooleanField(default=False)
    # The commit's subject (the first line of its message), shown beside the commit.
    git_subject = models.CharField(max_length=300, blank=True)
    prompt_version = models.JSONField(null=True, blank=True)
    config_snapshot = models.JSONField(default=dict, blank=True)
    raw_yaml = models.TextField(blank=True)
    # {file the load read: sha256}. With raw_yaml, what a run launched before snapshots
    # existed is pinned to (a run with a snapshot runs its snapshot's files).
    agent_sources = models.JSONField(default=dict, blank=True)
    # The files the run ran (launch, re-grade, CLI); None for imported runs and older runs.
    # PROTECT: a snapshot is the record of what its runs ran (and what a queued run will run),
    # so it cannot be deleted from under them; deleting the runs frees it.
    snapshot = models.ForeignKey(
        AgentSnapshot, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    # What it was launched with (runs.core.runoptions.RunOptions as JSON): read it as
    # ``run_options``.
    options = models.JSONField(default=dict, blank=True)
    # The options the lists filter, count and badge by, as columns (``RunOptions.columns``,
    # written with the JSON): how many times each case runs (1: once), the launch's limit and
    # filter, and how many cases its agent.yaml had (None: unknown, an import or an older run).
    repeats = models.IntegerField(default=1)
    case_limit = models.IntegerField(null=True, blank=True)
    case_filter = models.TextField(blank=True)
    config_cases = models.IntegerField(null=True, blank=True)
    holodeck_version = models.CharField(max_length=64, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    cli_args = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    report_timestamp = models.CharField(max_length=64, blank=True)
    # sha256 of the result file a run was imported from or written to (its canonical JSON):
    # importing the same file twice, or the file of a stored CLI run, adds nothing.
    source_hash = models.CharField(max_length=64, blank=True, db_index=True)
    error = models.TextField(blank=True)
    # Summary counters (the run list and the tiles read only these).
    total_cases = models.IntegerField(default=0)
    cases_done = models.IntegerField(default=0)
    total_turns = models.IntegerField(default=0)
    turns_done = models.IntegerField(default=0)
    # Settled cases by verdict, one column a word (runs.core.verdicts.summary.OutcomeCounts):
    # cases_done = passed + failed + errored + not graded + cancelled (+ skipped); pass_rate =
    # passed over passed + failed + errored, NULL while none is graded. Read as ``Run.counts``.
    passed_cases = models.IntegerField(default=0)
    failed_cases = models.IntegerField(default=0)
    errored_cases = models.IntegerField(default=0)
    not_graded_cases = models.IntegerField(default=0)
    cancelled_cases = models.IntegerField(default=0)
    pass_rate = models.FloatField(null=True, blank=True)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)
    # The run's summary (runs.core.verdicts.summary.RunSummary), stored when it ends.
    summary = models.JSONField(default=dict, blank=True)
    # What its case list counts under each filter, its status reason's causes and a repeated
    # run's tile, counted when it ended (runs.selectors.case_counts); null: counted on read.
    list_counts = models.JSONField(null=True, blank=True)
    # Kept by retention (manage.py prune_runs never deletes a kept run).
    keep = models.BooleanField(default=False)
    # A launch's, re-grade's or re-run's idempotency key (the form's hidden field, the API's
    # Idempotency-Key header): the same key from the same user for the same request answers
    # with this run again; for another request it is refused (runs.services.launch).
    idempotency_key = models.CharField(max_length=100, blank=True)
    # What the key was first sent with: the endpoint and its target ("launch:project:3",
    # "re-run:run:12", "re-grade:run:12"), and a digest of the request's options ("" for a run
    # keyed before it was recorded: its scope alone is then compared).
    idempotency_scope = models.CharField(max_length=100, blank=True)
    idempotency_fingerprint = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "status", "-created_at"]),
            # Each project's latest run (the home page), whatever the number of its runs.
            models.Index(fields=["project", "-created_at", "-id"], name="run_project_latest"),
        ]
        # One run per result file and project: concurrent imports of one file add it once.
        constraints = [
            models.UniqueConstraint(
                fields=["project", "source_hash"],
                condition=~models.Q(source_hash="") & models.Q(project__isnull=False),
                name="run_unique_source_per_project",
            ),
            models.UniqueConstraint(
                fields=["source_hash"],
                condition=~models.Q(source_hash="") & models.Q(project__isnull=True),
                name="run_unique_source_without_project",
            ),
            # A retried or double-submitted launch, re-grade or re-run creates one run; a key
            # is one request's (its scope and options are checked against the run's).
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_unique_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} of {self.agent_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("run_detail", kwargs={"run_id": self.pk})

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def is_stopping(self) -> bool:
        """Cancelled while some of its cases were running: those stop after their current turn
        (a worker that died meanwhile has its case settled by the sweeper). Read from the
        counters, no query: a cancelled run's pending cases are counted done at once, so a case
        not counted yet is one still running."""
        return self.status == Run.Status.CANCELLED and self.cases_done < self.total_cases

    @cached_property
    def run_options(self) -> RunOptions:
        """What it was launched with, typed (an older row's unreadable values as defaults)."""
        return RunOptions.stored(self.options)

    @property
    def cases_stopping(self) -> int:
        """How many cases a stopping run still waits for (0 unless ``is_stopping``)."""
        return self.total_cases - self.cases_done if self.is_stopping else 0

    @property
    def is_live(self) -> bool:
        """Still changing: active, or stopping. Its page polls, its summary is live, and it
        cannot be downloaded or re-graded yet."""
        return self.is_active or self.is_stopping

    @property
    def regrade(self) -> RegradeSources | None:
        """Where a re-grade's transcripts come from and what graded them (None: not one)."""
        return RegradeSources.stored(self.regrade_sources)

    @property
    def partial_text(self) -> str:
        """ "partial: 3 of 8 cases, filter 'cash'" when the run ran fewer cases than its
        agent.yaml had (a limit or a filter), else "" (read from its option columns)."""
        return partial_text(self)

    @property
    def launch_options(self) -> list[tuple[str, str]]:
        """What the run was launched with, as (label, value) rows for its page; [] for a run
        with no launch options (an import; a re-grade says its own sources)."""
        if self.source == Run.Source.REGRADE:
            return []
        return run_launch_options(self.run_options, git_ref=self.git_ref, commit=self.git_commit)

    @property
    def counts(self) -> OutcomeCounts:
        """Its cases by verdict from its counter columns, no query (``counters_of``)."""
        return counters_of(self)

    @property
    def status_reason(self) -> StatusReason:
        """Why it has its status, from its counters (no query; without causes): what the lists
        say beside a status chip. The run page names causes (``run_status_reason_get``)."""
        return run_status_reason(status=self.status, counts=self.counts, run_error=self.error)

    @property
    def progress_percent(self) -> int:
        if not self.total_turns:
            return 100 if not self.is_active else 0
        return min(100, int(self.turns_done * 100 / self.total_turns))

    # --- single-row state transitions ----------------------------------------------------------
    # Each is a conditional UPDATE that must touch one row, so a redelivered task or a double
    # click cannot move a run twice.

    def mark_running(self) -> bool:
        now = timezone.now()
        claimed = Run.objects.filter(pk=self.pk, status=Run.Status.QUEUED).update(
            status=Run.Status.RUNNING, started_at=now
        )
        if claimed:
            self.status, self.started_at = Run.Status.RUNNING, now
        return claimed == 1

    def finish(self, *, passed: bool, **fields: Any) -> bool:
        status = Run.Status.PASSED if passed else Run.Status.FAILED
        return self._end(status, **fields)

    def fail(self, error: str, **fields: Any) -> bool:
        return self._end(Run.Status.ERROR, error=error, **fields)

    def cancel(self, **fields: Any) -> bool:
        """End the run cancelled; with ``fields`` (its summary), a run holding cases a cancel
        stopped that ends on its own (a re-grade of a cancelled run)."""
        return self._end(Run.Status.CANCELLED, **fields)

    def _end(self, status: str, **fields: Any) -> bool:
        now = timezone.now()
        values = {"status": status, "finished_at": now, **fields}
        ended = Run.objects.filter(pk=self.pk, status__in=self.ACTIVE).update(**values)
        if ended:
            for key, value in values.items():
                setattr(self, key, value)
        return ended == 1


# The counter column of each settled case verdict (``Run.counts`` reads them back).
CASE_COUNTERS: dict[Outcome, str] = {
    Outcome.PASSED: "passed_cases",
    Outcome.FAILED: "failed_cases",
    Outcome.ERROR: "errored_cases",
    Outcome.NOT_GRADED: "not_graded_cases",
    Outcome.CANCELLED: "cancelled_cases",
}


class CaseRow(CompareColumns):
    Status = CaseState  # the verdict vocabulary's states (runs.core.verdicts.outcomes.CaseState)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="cases")
    index = models.IntegerField()
    # Which run of the case this is, from 0, when the run repeats its cases
    # (``execution.repeats``: each repetition an independent session); 0 without repeats.
    repetition = models.IntegerField(default=0)
    name = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=16, choices=CaseState.choices(), default=CaseState.PENDING)
    attempts = models.IntegerField(default=0)
    # Set once when the case task is put on the queue (parallelism is bounded per run).
    enqueued = models.BooleanField(default=False)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # Stamped while the running attempt works: a stale heartbeat means a dead worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # "<host>:<pid>:<start>" of the process running the current attempt (runs.core.owner).
    claimed_by = models.CharField(max_length=300, blank=True)
    is_multi_turn = models.BooleanField(default=False)
    turn_count = models.IntegerField(default=0)
    turns_passed = models.IntegerField(default=0)
    passed = models.BooleanField(null=True)
    # The stored verdict (runs.core.verdicts.outcomes): passed | failed | not_graded | cancelled,
    # error (its execution failed: no result), or "" while it has none (pending, running).
    outcome = models.CharField(max_length=16, blank=True)
    # {kind: passed | failed | not_graded} over its turns (runs.core.verdicts.outcomes), for
    # compare.
    kind_outcomes = models.JSONField(default=dict, blank=True)
    test_input = models.TextField(blank=True)
    agent_response = models.TextField(null=True, blank=True)
    ground_truth = models.TextField(null=True, blank=True)
    expected_tools = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tools_matched = models.BooleanField(null=True)
    metric_results = models.JSONField(default=list, blank=True)
    processed_files = models.JSONField(default=list, blank=True)
    errors = models.JSONField(default=list, blank=True)
    execution_time_ms = models.IntegerField(default=0)
    # How long the agent session took to start (e.g. a Claude Code CLI process), included in
    # execution_time_ms; null where the backend reported none (imports, older runs).
    session_start_ms = models.IntegerField(null=True, blank=True)
    token_usage = models.JSONField(null=True, blank=True)
    timestamp = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "runs_caseresult"  # its name before the class was named a row
        ordering = ["run", "index", "repetition"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "index", "repetition"], name="case_unique_index_repetition"
            )
        ]
        indexes = [
            models.Index(fields=["run", "passed"]),
            models.Index(fields=["run", "status"]),
            # The lists by verdict, in their order: a page is the first rows of the index.
            models.Index(
                fields=["run", "outcome", "index", "repetition"], name="case_run_outcome_order"
            ),
            models.Index(
                fields=["run", "index", "repetition"],
                condition=models.Q(outcome__in=("error", "failed")),
                name="case_run_failures",
            ),
            models.Index(
                fields=["run", "index", "repetition"],
                condition=models.Q(kind_outcomes__tools="failed"),
                name="case_run_tools_failed",
            ),
            # The live poll's "started or finished since".
            models.Index(fields=["run", "finished_at"]),
            models.Index(fields=["run", "started_at"], name="case_run_started"),
        ]

    def __str__(self) -> str:
        return case_label(self.name, self.index)

    def get_absolute_url(self) -> str:
        return reverse("case_detail", kwargs={"run_id": self.run_id, "case_id": self.pk})

    @property
    def label(self) -> str:
        return self.name or case_text(self.index)  # "case 1": reads better in page titles


class TurnRow(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="turn_rows")
    case = models.ForeignKey(CaseRow, on_delete=models.CASCADE, related_name="turns")
    index = models.IntegerField()
    input = models.TextField()
    response = models.TextField(null=True, blank=True)
    ground_truth = models.TextField(null=True, blank=True)
    expected_tools = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_invocations = models.JSONField(default=list, blank=True)
    tools_matched = models.BooleanField(null=True)
    arg_match_details = models.JSONField(null=True, blank=True)
    passed = models.BooleanField(default=False)
    skipped = models.BooleanField(default=False)
    # passed | failed | error | not_graded | skipped (runs.core.verdicts.outcomes), decided when
    # written; kind_outcomes: {kind: passed | failed | not_graded}, kinds incl. "tools".
    outcome = models.CharField(max_length=16, default=Outcome.FAILED.value)
    kind_outcomes = models.JSONField(default=dict, blank=True)
    execution_time_ms = models.IntegerField(default=0)
    token_usage = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True)
    grader_details = models.JSONField(null=True, blank=True)
    # Its identity across runs (runs.core.reviewing.identity), for the reviews that follow it: its
    # place, a digest of what defines it, a digest of how it failed ("" when it passed).
    turn_key = models.CharField(max_length=32, blank=True)
    definition = models.CharField(max_length=32, blank=True)
    failure = models.CharField(max_length=32, blank=True)

    class Meta:
        db_table = "runs_turnresult"  # its name before the class was named a row
        ordering = ["case", "index"]
        constraints = [models.UniqueConstraint(fields=["case", "index"], name="turn_unique_index")]
        indexes = [
            # Covering: the compare page reads every turn's verdicts of its runs from the index
            # alone (not the wide rows); a live summary counts the turns by outcome.
            models.Index(
                fields=["run", "case", "index", "outcome", "kind_outcomes", "execution_time_ms"],
                name="turn_verdicts_cover",
            ),
            models.Index(fields=["run", "outcome"], name="turn_run_outcome"),
        ]

    def __str__(self) -> str:
        return f"turn {self.index} of {self.case}"


class MetricRow(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_rows")
    turn = models.ForeignKey(TurnRow, on_delete=models.CASCADE, related_name="metrics")
    metric_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, db_index=True)
    score = models.FloatField(null=True, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(default=False)
    # passed | failed | error | not_graded | skipped (runs.core.verdicts.outcomes), decided when
    # written.
    outcome = models.CharField(max_length=16, default=Outcome.FAILED.value)
    scale = models.CharField(max_length=32, blank=True)
    error = models.TextField(null=True, blank=True)
    retry_count = models.IntegerField(null=True, blank=True)
    evaluation_time_ms = models.IntegerField(null=True, blank=True)
    model_used = models.CharField(max_length=200, null=True, blank=True)
    reasoning = models.TextField(null=True, blank=True)
    judge_usage = models.JSONField(null=True, blank=True)
    judge_cost_usd = models.FloatField(null=True, blank=True)
    position = models.IntegerField(default=0)
    # Its case's index: the "a metric failed" list reads ``metric_failures_by_case`` in order.
    case_index = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "runs_metricresult"  # its name before the class was named a row
        ordering = ["turn", "position"]
        indexes = [
            models.Index(fields=["run", "kind", "metric_name"]),
            models.Index(
                fields=["run", "metric_name", "case_index"],
                condition=models.Q(outcome="failed"),
                name="metric_failures_by_case",
            ),
            # Covering: a live summary's metric counts and the compare page's judge sums.
            models.Index(
                fields=[
                    "run",
                    "metric_name",
                    "kind",
                    "outcome",
                    "score",
                    "evaluation_time_ms",
                    "judge_cost_usd",
                ],
                name="metric_summary_cover",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric_name}={self.score}"


class ApiToken(models.Model):
    """A personal API token for scripts and CI (``Authorization: Bearer <token>``).

    Only a SHA-256 digest of the token is stored; the token itself is shown once, when it is
    created. ``prefix`` (its first characters) is what lists show. A revoked token stays listed
    (with its revocation time) and authenticates nothing.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class WorkerHeartbeat(models.Model):
    """A live Celery worker process as it last reported itself (every few seconds, from its
    sweeper thread): the dashboard's "no worker" banner, ``/readyz`` and ``manage.py workers``
    read these rows. A row whose ``seen_at`` is old belongs to a worker that is gone."""

    name = models.CharField(max_length=300, unique=True, help_text="host:pid of the worker")
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    concurrency = models.IntegerField(default=1)
    queue = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["host", "pid"]

    def __str__(self) -> str:
        return f"worker {self.name}"


# The rows of reviews, roles and the audit log, and the transcripts' rows, live in modules of
# their own (they name these rows by string); importing them here registers them with the app.
from runs.review_models import (  # noqa: E402
    AuditEntry,
    ProjectRole,
    Review,
    ReviewChange,
    TriageCategory,
)
from runs.transcript_models import TurnTranscript  # noqa: E402

__all__ = [
    "CASE_COUNTERS",
    "AgentProject",
    "AgentSnapshot",
    "ApiToken",
    "AuditEntry",
    "CaseRow",
    "MetricRow",
    "ProjectRole",
    "Review",
    "ReviewChange",
    "Run",
    "TriageCategory",
    "TurnRow",
    "TurnTranscript",
    "WorkerHeartbeat",
]

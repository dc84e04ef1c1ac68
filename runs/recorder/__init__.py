"""The one write path of a run: engine events -> rows.

Both ways of running an agent write through here, so a run stored by ``manage.py run_agent``
and the same run executed by the dashboard's workers give the same rows:

- ``run_open`` (``opening``) creates the Run, with everything it is opened with, and its case
  rows (queued for the dashboard, running for the CLI);
- ``case_claim`` (``cases``) takes a case for one attempt of one process (``runs.core.owner``);
- ``CaseRecorder`` (``events``) turns the engine's events into writes: each finished turn
  within a fraction of a second (a Celery task: ``turns_append``), or each case's turns
  together when it finishes (the CLI batches); ``case_finish`` writes the case's result with
  the turns not yet written, in one transaction;
- ``case_fail`` / ``case_cancel`` (``cases_fail_open`` / ``cases_cancel_pending`` for a whole
  run) settle cases that produced no result;
- ``run_finish`` (``finish``) computes the roll-up from the rows and ends the run.

A finished report (a HoloDeck file being imported) is written whole by ``run_record``
(``record``), with the same mapping.

Every write of an attempt is conditional on the attempt still owning its case, so a redelivered
message and a dead worker's late write never interleave rows. Wire -> rows is ``runs.mapping``.
"""

from runs.recorder.cases import (
    MAX_CASE_ATTEMPTS,
    CaseSuperseded,
    case_cancel,
    case_claim,
    case_fail,
    case_finish,
    case_heartbeat,
    case_not_graded,
    case_owned,
    cases_cancel_pending,
    cases_fail_open,
    turn_rows_insert,
    turns_append,
)
from runs.recorder.events import CaseKey, CaseRecorder, close_thread_connection
from runs.recorder.finish import run_abort, run_counters, run_finish, run_settle
from runs.recorder.opening import GIT_FIELDS, case_rows_ensure, regrade_sources, run_open
from runs.recorder.record import run_record

__all__ = [
    "GIT_FIELDS",
    "MAX_CASE_ATTEMPTS",
    "CaseKey",
    "CaseRecorder",
    "CaseSuperseded",
    "case_cancel",
    "case_claim",
    "case_fail",
    "case_finish",
    "case_heartbeat",
    "case_not_graded",
    "case_owned",
    "case_rows_ensure",
    "cases_cancel_pending",
    "cases_fail_open",
    "close_thread_connection",
    "regrade_sources",
    "run_abort",
    "run_counters",
    "run_finish",
    "run_open",
    "run_record",
    "run_settle",
    "turn_rows_insert",
    "turns_append",
]

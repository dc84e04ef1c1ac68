"""Round trips of result files: the identity an exported run carries, and the check of an
imported file's summary against its results.

Every export of a run (the run page's JSON, the API's, ``run_agent``'s result file) names the
run in ``report.environment[ENVIRONMENT_KEY]``: ``environment`` is HoloDeck's free
``{str: str}`` block, so the file stays one HoloDeck reads. It carries the subject of the
run's commit too (``SUBJECT_KEY``), read back when the file is imported. Importing a file that
names a run the database already holds is recognised instead of adding a second copy; a file
naming a run it does not hold is imported with that identity, so exporting it there and
importing it back where it came from is recognised too.

A HoloDeck summary (``ReportSummary``) counts cases as passed or failed (every case that did
not pass is failed). A file whose summary says something its results do not is imported with
its results as the truth and a warning saying what the file claimed.
"""

from __future__ import annotations

import uuid

from runs.core.verdicts.numbers import format_rate, pass_rate_of
from runs.core.wire.models import EvalRun, TestReport

ENVIRONMENT_KEY = "holodeck_web_run"
# The subject of the run's commit (``Run.git_subject``), when it has one: HoloDeck's metadata
# has the commit but not its subject, so our exports carry it here and imports read it back.
SUBJECT_KEY = "holodeck_web_git_subject"
MAX_SUBJECT = 300  # Run.git_subject's length

# HoloDeck rounds its stored pass rate its own way (58.0 for 7 of 12): a difference below one
# percentage point is rounding, not a contradiction.
PASS_RATE_TOLERANCE = 1.0


def run_identity(eval_run: EvalRun) -> uuid.UUID | None:
    """The run a result file names (``report.environment``), None when it names none or its
    value is not a UUID (a file edited by hand: it is imported as a new run)."""
    value = eval_run.report.environment.get(ENVIRONMENT_KEY)
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def with_identity(
    environment: dict[str, str], uid: uuid.UUID | str, *, subject: str = ""
) -> dict[str, str]:
    """``environment`` naming the run ``uid`` and its commit's ``subject`` (any identity and
    subject it held before replaced; no subject key without a subject)."""
    named = {key: value for key, value in environment.items() if key != SUBJECT_KEY}
    named[ENVIRONMENT_KEY] = str(uid)
    if subject:
        named[SUBJECT_KEY] = subject
    return named


def commit_subject(eval_run: EvalRun) -> str:
    """The commit subject a result file carries (one of our exports), cut to MAX_SUBJECT
    characters; "" for a HoloDeck file (it has none)."""
    value = eval_run.report.environment.get(SUBJECT_KEY)
    return value.strip()[:MAX_SUBJECT] if isinstance(value, str) else ""


def summary_contradiction(report: TestReport) -> str | None:
    """What the report's summary claims that its results contradict, as one sentence; None
    when they agree (counts equal, pass rate within rounding)."""
    stated = report.summary
    total = len(report.results)
    passed = sum(1 for result in report.results if result.passed)
    rate = pass_rate_of(passed, total) or 0.0
    counts_agree = (stated.total_tests, stated.passed, stated.failed) == (
        total,
        passed,
        total - passed,
    )
    if counts_agree and abs(stated.pass_rate - rate) < PASS_RATE_TOLERANCE:
        return None
    return (
        f"The file's summary says {stated.passed} passed and {stated.failed} failed of "
        f"{stated.total_tests} test cases (pass rate {format_rate(stated.pass_rate)}), but its "
        f"results say {passed} passed and {total - passed} failed of {total} "
        f"({format_rate(rate)}): the results "
        "are shown."
    )

"""One count shape on every surface (issue 38): a run in any state — running with cases in
every state, cancelled part-way (stopping, then settled), finished, with errored, not graded
and failed cases — states the same case and turn counts on the run page's tiles, its live
poll, the API, the JSON / Markdown / JUnit exports, compare's headline, the trends point and
the gate, and the counts add up: total = passed + failed + errored + not graded + skipped +
cancelled + pending, for cases and for turns.

The runs are built with the page factories and moved on by the real recorder and services
(``case_claim`` / ``case_fail``, ``run_cancel``, ``case_cancel``, ``run_settle``,
``run_finish``), so the counters are those the recorder keeps."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.core.verdicts.outcomes import COUNTED_OUTCOMES
from runs.core.verdicts.summary import OutcomeCounts
from runs.core.wire.models import COUNTS_KEY
from runs.models import AgentProject, CaseRow, Run
from runs.recorder import run_finish, run_settle
from runs.recorder.cases import case_cancel, case_claim, case_fail
from tests.web.factories import RunSpec, build_run, make_not_graded, running_case
from tests.web.services_helpers import eager_celery

__all__ = ["eager_celery"]  # a fixture, imported for this module

pytestmark = pytest.mark.django_db

FIELDS = ("total", *(outcome.value for outcome in COUNTED_OUTCOMES))


@dataclass(frozen=True)
class Plan:
    cases: int
    turns: int
    done: int  # cases settled by the factory, the first ones (passed or failed)
    failing: frozenset[int]  # of those, the failed ones
    not_graded: frozenset[int]  # of those, the passed ones turned not graded (ended runs)
    running: int  # pending cases made running, with ``written`` turns written
    written: int
    errored: int  # pending cases whose attempt failed (``case_fail``)
    ending: str  # queued, live, stopping (cancelled, its running cases still going), cancelled,
    # finished


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    cases = draw(st.integers(2, 6))
    turns = draw(st.integers(1, 3))
    ending = draw(st.sampled_from(["queued", "live", "stopping", "cancelled", "finished"]))
    queued = ending == "queued"  # nothing has run yet
    done = 0 if queued else draw(st.integers(1, cases))
    failing = draw(st.frozensets(st.integers(1, done - 1), max_size=done)) if done > 1 else set()
    rest = cases - done
    running = 0 if ending in ("finished", "queued") else draw(st.integers(0, rest))
    errored = 0 if queued else draw(st.integers(0, rest - running))
    passed = [index for index in range(1, done) if index not in failing]
    not_graded: frozenset[int] = frozenset()
    if ending not in ("live", "queued") and passed:
        not_graded = draw(st.frozensets(st.sampled_from(passed)))
    return Plan(
        cases=cases,
        turns=turns,
        done=done,
        failing=frozenset(failing),
        not_graded=not_graded,
        running=running,
        written=draw(st.integers(0, turns - 1)),
        errored=errored,
        ending=ending,
    )


def built(plan: Plan, project: AgentProject) -> Run:
    status = Run.Status.QUEUED if plan.ending == "queued" else Run.Status.RUNNING
    spec = RunSpec(
        cases=plan.cases, turns=plan.turns, failing=plan.failing, status=status, done=plan.done,
    )  # fmt: skip
    run = build_run(project, spec)
    pending = list(run.cases.filter(status=CaseRow.Status.PENDING).order_by("index"))
    running = [
        running_case(run, case.index, written=plan.written) for case in pending[: plan.running]
    ]
    for case in pending[plan.running : plan.running + plan.errored]:
        attempt = case_claim(case)
        assert attempt is not None
        case_fail(case, attempt, "WorkerLostError: the worker died")
    for index in plan.not_graded:
        make_not_graded(Run.objects.get(pk=run.pk), index)
    if plan.ending in ("stopping", "cancelled"):
        from runs.services.launch import run_cancel

        assert run_cancel(run=Run.objects.get(pk=run.pk))
    if plan.ending == "cancelled":
        for case in running:
            assert case_cancel(case, running=True)
        assert run_settle(Run.objects.get(pk=run.pk))
    if plan.ending == "finished":
        for case in run.cases.filter(status=CaseRow.Status.PENDING):
            attempt = case_claim(case)
            assert attempt is not None
            case_fail(case, attempt, "WorkerLostError: the worker died")
        run_finish(run.pk)
    return Run.objects.get(pk=run.pk)


def expected_cases(plan: Plan) -> dict[str, int]:
    settled_pending = plan.cases - plan.done - plan.running - plan.errored
    cancelled = {"queued": 0, "live": 0, "stopping": settled_pending, "cancelled": settled_pending
                 + plan.running, "finished": 0}[plan.ending]  # fmt: skip
    errored = plan.errored + (settled_pending if plan.ending == "finished" else 0)
    counts = {
        "total": plan.cases,
        "passed": plan.done - len(plan.failing) - len(plan.not_graded),
        "failed": len(plan.failing),
        "error": errored,
        "not_graded": len(plan.not_graded),
        "skipped": 0,
        "cancelled": cancelled,
    }
    counts["pending"] = plan.cases - sum(v for k, v in counts.items() if k != "total")
    return counts


# --- each surface's counts ---------------------------------------------------------------------

_TILE = re.compile(r'data-count="(cases|turns)">(\d+)/(\d+)</span>')
_SPANS = {"cases": "summary-cases", "turns": "summary-turns"}
_COUNT = re.compile(r'class="count-(\w+)[^"]*"[^>]*>(?:<span[^>]*>)?(\d+)')


def tile_counts(html: str, scope: str) -> tuple[tuple[int, int], dict[str, int]]:
    """The tile's "done/total" and the counts under it (zero counts are left out there)."""
    done_total = {m[1]: (int(m[2]), int(m[3])) for m in _TILE.finditer(html)}[scope]
    span = html.split(f'class="small muted {_SPANS[scope]}">', 1)[1].split("</span></div>", 1)[0]
    return done_total, {name: int(n) for name, n in _COUNT.findall(span)}


def progress_counts(html: str, scope: str) -> tuple[int, int]:
    found = re.search(rf'data-progress="{scope}">(\d+)/(\d+) {scope}', html)
    assert found is not None
    return int(found[1]), int(found[2])


def as_dict(counts: OutcomeCounts | dict[str, Any]) -> dict[str, int]:
    data = counts if isinstance(counts, dict) else counts.model_dump()
    return {field: int(data[field]) for field in FIELDS}


def check_tiles(html: str, cases: dict[str, int], turns: dict[str, int]) -> None:
    for scope, counts in (("cases", cases), ("turns", turns)):
        (done, total), shown = tile_counts(html, scope)
        assert (done, total) == (counts["total"] - counts["pending"], counts["total"]), scope
        assert shown == {k: v for k, v in counts.items() if k != "total" and (v or k in
                         ("passed", "failed"))}, scope  # fmt: skip
        assert progress_counts(html, scope) == (done, total) or "run-progress" not in html


def adds_up(counts: dict[str, int]) -> bool:
    return counts["total"] == sum(v for k, v in counts.items() if k != "total")


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans())
def test_every_surface_states_the_same_counts_of_a_run_in_any_state_and_they_add_up(
    plan: Plan, viewer_client: Client, project: AgentProject
) -> None:
    run = built(plan, project)
    turns = surfaces_agree(viewer_client, run, project, expected_cases(plan))
    assert turns["total"] == plan.cases * plan.turns


def surfaces_agree(
    client: Client, run: Run, project: AgentProject, cases: dict[str, int]
) -> dict[str, int]:
    """Every surface states ``cases`` (and one count of the turns, which it answers) for
    ``run``, and they add up."""
    api = client.get(f"/api/v1/runs/{run.pk}").json()
    turns = as_dict(api["summary"]["turns"])
    assert as_dict(api["summary"]["cases"]) == cases
    assert as_dict(api["cases"]) == cases  # the counters say what the rows say
    assert adds_up(cases) and adds_up(turns)
    assert turns["total"] == run.total_turns

    page = client.get(reverse("run_detail", args=[run.pk])).text
    check_tiles(page, cases, turns)
    poll = client.get(reverse("run_progress", args=[run.pk])).text
    check_tiles(poll, cases, turns)

    from runs.compare.reads.comparison import compare_runs

    (headline,) = compare_runs([run], run, []).headlines
    assert (as_dict(headline.summary.cases), as_dict(headline.summary.turns)) == (cases, turns)
    if not run.is_live:
        check_exports(run, cases, turns)
        check_gate_and_trends(run, project, cases)
    return turns


def rows_cases(run: Run) -> dict[str, int]:
    """The run's cases by their stored outcome (no outcome yet: pending), as rows hold them."""
    counts = dict.fromkeys(FIELDS, 0)
    for outcome in CaseRow.objects.filter(run=run).values_list("outcome", flat=True):
        counts[outcome or "pending"] += 1
        counts["total"] += 1
    return counts


@pytest.mark.django_db(transaction=True)  # the launch is queued on commit: eager, it runs then
def test_repeated_regraded_and_partly_rerun_runs_state_the_same_counts_everywhere(
    tmp_path: Path, eager_celery: None, viewer_client: Client
) -> None:
    from runs.services import launch
    from runs.services.regrade import run_regrade_create
    from runs.services.rerun import run_rerun
    from tests.web.services_helpers import example_project

    project = example_project(tmp_path)  # its third case fails on purpose
    repeated = launch.run_create(project=project, repeats=2)  # eager: it runs to its end here
    regraded = run_regrade_create(original=Run.objects.get(pk=repeated.pk))
    rerun = run_rerun(original=Run.objects.get(pk=repeated.pk), cases="failed")
    for made in (repeated, regraded, rerun):
        run = Run.objects.get(pk=made.pk)
        assert not run.is_live, run
        cases = rows_cases(run)
        assert cases["failed"] or cases["error"], run  # each holds the failing case
        surfaces_agree(viewer_client, run, project, cases)
    assert Run.objects.get(pk=repeated.pk).repeats == 2 and regraded.regrade_of_id == repeated.pk
    assert (
        0 < Run.objects.get(pk=rerun.pk).total_cases < Run.objects.get(pk=repeated.pk).total_cases
    )


def check_exports(run: Run, cases: dict[str, int], turns: dict[str, int]) -> None:
    from runs.core.writers.results import counts_text, export_text
    from runs.selectors.export import run_eval_run

    eval_run = run_eval_run(run=run)
    data = json.loads(export_text(eval_run, "json"))
    report = data["report"]
    assert as_dict(report["run_summary"]["cases"]) == cases
    assert as_dict(report["run_summary"]["turns"]) == turns
    ours = json.loads(report["environment"][COUNTS_KEY])
    assert (as_dict(ours["cases"]), as_dict(ours["turns"])) == (cases, turns)
    # HoloDeck's own summary counts the cases that ran; the cancelled ones are named apart.
    assert report["summary"]["total_tests"] == cases["total"] - cases["cancelled"]
    assert len(report.get("cancelled_cases") or []) == cases["cancelled"]
    junit = ET.fromstring(export_text(eval_run, "junit").split("?>", 1)[1])
    suite = junit.find("testsuite")
    assert suite is not None
    assert int(suite.get("tests", "")) == cases["total"] == len(suite.findall("testcase"))
    assert int(suite.get("failures", "")) == cases["failed"]
    assert int(suite.get("errors", "")) == cases["error"]
    assert int(suite.get("skipped", "")) == cases["not_graded"] + cases["cancelled"]
    markdown = export_text(eval_run, "markdown")
    summary = eval_run.report.run_summary
    assert summary is not None
    assert f"**Test cases**: {cases['total']} total: {counts_text(summary.cases)}" in markdown
    assert f"**Turns**: {turns['total']} total: {counts_text(summary.turns)}" in markdown


def check_gate_and_trends(run: Run, project: AgentProject, cases: dict[str, int]) -> None:
    from runs.compare.gate import gate_evaluate
    from runs.compare.reads.baseline import Baseline
    from runs.core.writers.gate_markdown import GateOptions
    from runs.selectors.trends import finished_runs

    result = gate_evaluate(run, Baseline(run=run, rule="itself", added=False), GateOptions())
    assert as_dict(result.run.summary.cases) == cases
    points = {point.id: point for point in finished_runs(project=project, agent="")}
    if run.status in (Run.Status.PASSED, Run.Status.FAILED, Run.Status.ERROR):
        assert points[run.pk].cases is not None
        assert as_dict(points[run.pk].cases) == cases


# --- each finding of issue 38, as it was seen --------------------------------------------------


def test_the_live_tiles_and_progress_add_up_while_the_polled_metrics_are_seconds_old(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(
        project, RunSpec(cases=6, turns=2, failing=(), status=Run.Status.RUNNING, done=1)
    )
    url = reverse("run_progress", args=[run.pk])
    viewer_client.get(url)  # the poll counts the live summary and keeps it a few seconds
    for case in run.cases.filter(status=CaseRow.Status.PENDING).order_by("index")[:3]:
        attempt = case_claim(case)
        assert attempt is not None
        case_fail(case, attempt, "WorkerLostError: the worker died")
    html = viewer_client.get(url).text
    (done, total), shown = tile_counts(html, "cases")
    assert (done, total) == (4, 6) == progress_counts(html, "cases")
    assert shown == {"passed": 1, "failed": 0, "error": 3, "pending": 2}
    (turns_done, turns_total), turns = tile_counts(html, "turns")
    assert turns_total == 12 and turns_total == sum(turns.values())
    assert (turns_done, turns_total) == progress_counts(html, "turns")


def test_a_cancelled_repeated_run_claims_pass_at_k_only_over_its_complete_cases(
    viewer_client: Client, project: AgentProject
) -> None:
    from runs.recorder.cases import cases_cancel_pending
    from tests.web.factories import repeated_run

    run = repeated_run(project, [1.0, 1.0, 1.0], repeats=3, seed=1)
    CaseRow.objects.filter(run=run, index=2).update(
        status=CaseRow.Status.PENDING, outcome="", passed=None
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert "Repetitions (so far)" in page
    assert cases_cancel_pending(Run.objects.get(pk=run.pk)) == 3
    run_finish(run.pk)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    # 2 of the 3 cases ran every repetition: the third, never run, claims nothing.
    assert '<span data-repeat="complete">2</span> complete cases' in page
    assert 'data-repeat="incomplete">1 case incomplete</span>' in page
    assert '<span data-repeat="judged">2</span> cases' in page


def test_a_holodeck_shaped_result_file_carries_our_counts_where_holodeck_readers_ignore_them(
    viewer_client: Client, project: AgentProject
) -> None:
    from runs.core.wire.holodeck_io import dump_eval_run
    from runs.selectors.export import run_eval_run

    run = build_run(project, RunSpec(cases=4, turns=1, failing=(1,), status=Run.Status.RUNNING))
    for index in (2, 3):
        make_not_graded(Run.objects.get(pk=run.pk), index)
    make_not_graded(Run.objects.get(pk=run.pk), 0)
    run_finish(run.pk)
    run = Run.objects.get(pk=run.pk)
    data = json.loads(dump_eval_run(run_eval_run(run=run), holodeck=True))
    report = data["report"]
    assert (report["summary"]["passed"], report["summary"]["failed"]) == (0, 4)
    assert "run_summary" not in report  # HoloDeck's readers forbid unknown keys
    ours = json.loads(report["environment"][COUNTS_KEY])["cases"]
    assert (ours["passed"], ours["failed"], ours["not_graded"]) == (0, 1, 3)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert (
        "HoloDeck's own <code>summary</code> says 0 passed and "
        '<span data-holodeck="failed">4</span> failed of 4' in page
    )


def test_a_run_whose_only_bad_cases_errored_still_offers_a_rerun_of_them(
    project: AgentProject,
) -> None:
    from runs.selectors.reruns import run_rerun_state
    from tests.web.factories import make_given_up
    from tests.web.test_reruns import snapshotted

    run = build_run(project, RunSpec(cases=3, turns=1, failing=(), status=Run.Status.RUNNING))
    make_given_up(run, 2, "WorkerLostError: the worker died")
    run_finish(run.pk)
    run = snapshotted(Run.objects.get(pk=run.pk))
    assert (run.failed_cases, run.errored_cases) == (0, 1)
    assert run_rerun_state(run=run).failed == 1

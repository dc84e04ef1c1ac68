"""Database builders for the page tests and the page benchmark.

``build_run`` writes a whole run (cases × turns × metrics) with bulk_create, so a 1,000 × 5 run
takes about a second. Case ``failing_case`` (index 1 by default) is a realistic failing multi-turn
case: a failed tool assertion with an arg-match diff, a code grader with nested details, a judge
that could not grade, and a skipped last turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F
from django.utils import timezone

from runs.core.runoptions import RunOptions
from runs.core.wire.requests import RequestLog
from runs.core.wire.transcripts import capped
from runs.models import AgentProject, CaseRow, MetricRow, Run, TurnRow, TurnTranscript

PASSWORD = "correct horse battery"
# The verdicts by kind (runs.core.verdicts.outcomes) of a passing turn and of the failing turn.
PASSING_KINDS = {"code": "passed", "geval": "passed", "standard": "passed", "tools": "passed"}
FAILING_KINDS = {"code": "failed", "geval": "not_graded", "standard": "failed", "tools": "failed"}


def make_user(username: str = "viewer", *, staff: bool = False) -> User:
    return User.objects.create_user(username=username, password=PASSWORD, is_staff=staff)


def make_project(
    name: str = "weather-agent", directory: str = "/srv/agents/weather"
) -> AgentProject:
    return AgentProject.objects.create(name=name, directory=directory)


@dataclass
class RunSpec:
    """What ``build_run`` makes; the defaults are a small finished failing run."""

    cases: int = 10
    turns: int = 3
    failing: Iterable[int] = (1,)
    status: str = Run.Status.FAILED
    done: int | None = None  # cases finished (the rest pending); None = all
    texts: dict[str, Any] = field(default_factory=dict)  # overrides for the failing case
    git_commit: str = "3f2a9c1d0b7e4f6a8c9d0e1f2a3b4c5d6e7f8a9b"
    # Each sent turn's transcript (TurnTranscript rows), as the scripted backend records one;
    # texts["system_prompt"] overrides the system prompt of each case's first turn.
    transcripts: bool = False


def build_run(
    project: AgentProject | None = None, spec: RunSpec | None = None, **fields: Any
) -> Run:
    spec = spec or RunSpec()
    failing = set(spec.failing)
    done = spec.cases if spec.done is None else spec.done
    now = timezone.now()
    run = Run.objects.create(
        project=project,
        agent_name=project.name if project else "weather-agent",
        status=spec.status,
        git_commit=spec.git_commit,
        git_branch="main",
        total_cases=spec.cases,
        cases_done=done,
        total_turns=spec.cases * spec.turns,
        turns_done=done * spec.turns,
        passed_cases=len([i for i in range(done) if i not in failing]),
        failed_cases=len([i for i in range(done) if i in failing]),
        pass_rate=_rate(done, failing),
        duration_ms=61_500,
        prompt_tokens=done * spec.turns * 100,
        completion_tokens=done * spec.turns * 20,
        total_tokens=done * spec.turns * 120,
        started_at=now - timedelta(minutes=1),
        finished_at=None if spec.status in Run.ACTIVE else now,
        **_with_options(fields),
    )
    cases = CaseRow.objects.bulk_create(
        [
            _case(run, index, spec, index in failing, index < done, now)
            for index in range(spec.cases)
        ]
    )
    turns: list[TurnRow] = []
    for case in cases:
        if case.status == CaseRow.Status.DONE:
            turns.extend(_turns(run, case, spec, case.index in failing))
    turns = TurnRow.objects.bulk_create(turns, batch_size=500)
    MetricRow.objects.bulk_create(
        [metric for turn in turns for metric in _metrics(run, turn)], batch_size=500
    )
    if spec.transcripts:
        TurnTranscript.objects.bulk_create(
            [_transcript_row(run, turn, spec) for turn in turns if not turn.skipped],
            batch_size=500,
        )
    return run


def _with_options(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with ``options`` (a dict, as ``Run.options`` stores it) written as the recorder
    writes them: the JSON and the run's option columns."""
    if "options" not in fields:
        return fields
    return {**fields, **RunOptions.model_validate(fields["options"]).fields()}


SYSTEM_PROMPT = "You are the refund assistant of Acme.\nLook orders up with orders_lookup."


def _transcript_row(run: Run, turn: TurnRow, spec: RunSpec) -> TurnTranscript:
    events = transcript_events(turn, system=spec.texts.get("system_prompt", SYSTEM_PROMPT))
    return TurnTranscript.of_events(events, turn=turn, run=run)


def transcript_events(turn: TurnRow, *, system: str) -> list[dict[str, Any]]:
    """A turn's transcript as the scripted backend records one: the system prompt (first
    turn), the message, a model call asking for the tools, the tool calls, the model call that
    answers, the answer. A failed turn's first call was retried, and its tool result was cut
    (``truncated``)."""
    failed = turn.outcome == "failed"
    events: list[dict[str, Any]] = []
    if turn.index == 0:
        events.append({"type": "system", "text": system, "source": "prompts/system.md"})
    events.append({"type": "user", "text": turn.input})
    if failed:
        events.append({"type": "retry", "error": "429 rate limited", "start_ms": 2.0})
    first = _model_call(5.0, 300.0, 100, 0, "tool_calls", attempt=2 if failed else 1)
    # The request it sent, as a backend keeps it (runs.core.wire.requests): this turn's own.
    messages = [{"role": "system", "content": system}, {"role": "user", "content": turn.input}]
    sent = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0}
    events.append({**first, "request": RequestLog().request(sent, fmt="openai")})
    start = 310.0
    for call in turn.tool_invocations or []:
        event = {
            "type": "tool_call",
            "id": f"call_{len(events)}",
            "name": call["name"],
            "args": call["args"],
            "result": call.get("result"),
            "error": call.get("error"),
            "start_ms": start,
            "duration_ms": call.get("duration_ms") or 1.0,
        }
        events.append(capped(event, cap=200) if failed else event)
        start += 10
    events.append(_model_call(start, 850.0, 0, 20, "stop"))
    if turn.response is not None:
        events.append({"type": "assistant", "text": turn.response})
    return events


def _model_call(
    start: float, duration: float, tokens_in: int, tokens_out: int, stop: str, attempt: int = 1
) -> dict[str, Any]:
    return {
        "type": "model_call",
        "model": "gpt-4o-mini",
        "start_ms": start,
        "duration_ms": duration,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_tokens": 40 if tokens_in else 0,
        "stop_reason": stop,
        "attempt": attempt,
        "messages": 2,
    }


def _rate(done: int, failing: set[int]) -> float | None:
    passed = len([i for i in range(done) if i not in failing])
    return round(passed * 100 / done, 2) if done else None


def _case(run: Run, index: int, spec: RunSpec, failing: bool, done: bool, now: Any) -> CaseRow:
    turns_passed = spec.turns - (2 if failing and spec.turns > 1 else 1) if failing else spec.turns
    return CaseRow(
        run=run,
        index=index,
        name=f"refund case {index}" if not failing else f"failing refund case {index}",
        status=CaseRow.Status.DONE if done else CaseRow.Status.PENDING,
        is_multi_turn=spec.turns > 1,
        turn_count=spec.turns,
        turns_passed=turns_passed if done else 0,
        passed=(not failing) if done else None,
        outcome=("failed" if failing else "passed") if done else "",
        kind_outcomes=(dict(FAILING_KINDS if failing else PASSING_KINDS)) if done else {},
        test_input="\n---\n".join(f"question {t}" for t in range(spec.turns)),
        agent_response=f"answer {spec.turns - 1}",
        execution_time_ms=1200 * spec.turns if done else 0,
        finished_at=now if done else None,
        token_usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    )


def _turns(run: Run, case: CaseRow, spec: RunSpec, failing: bool) -> list[TurnRow]:
    turns = []
    for index in range(spec.turns):
        turn = TurnRow(
            run=run,
            case=case,
            index=index,
            input=f"What is the refund for order {case.index}-{index}?",
            response=f"The refund for order {case.index}-{index} is **42.00 EUR**.",
            ground_truth="42.00 EUR",
            tool_invocations=[
                {
                    "name": "orders_lookup",
                    "args": {"order_id": f"{case.index}-{index}"},
                    "result": {"status": "delivered", "total": 42.0},
                    "bytes": 38,
                    "duration_ms": 3.5,
                    "error": None,
                }
            ],
            tool_calls=["orders_lookup"],
            tools_matched=True,
            arg_match_details=[_assertion(passed=True, actual=f"{case.index}-{index}")],
            passed=True,
            outcome="passed",
            kind_outcomes=dict(PASSING_KINDS),
            execution_time_ms=1200,
            token_usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            grader_details={"refund_grader": {"parsed": 42.0, "matched": True}},
        )
        turns.append(turn)
    if failing:
        _make_failing(turns, spec)
    for turn in turns:
        identify(turn, case)
    return turns


def identify(turn: TurnRow, case: CaseRow, *, failed_metrics: Iterable[str] = ()) -> None:
    """The turn's identity columns, as the recorder writes them (runs.core.reviewing.identity)."""
    from runs.core.reviewing.identity import definition_digest, failure_digest, turn_key

    turn.turn_key = turn_key(case.name, case.index, turn.index)
    turn.definition = definition_digest(
        input=turn.input, ground_truth=turn.ground_truth, expected_tools=turn.expected_tools,
        metrics=[],
    )  # fmt: skip
    turn.failure = failure_digest(
        outcome=turn.outcome, failed_metrics=failed_metrics, failed_tools=[],
        errored=bool(turn.errors),
    )  # fmt: skip


def _assertion(*, passed: bool, actual: Any, expected: Any = None) -> dict[str, Any]:
    expected = actual if expected is None else expected
    return {
        "tool": "orders_lookup",
        "args_asserted": ["order_id"],
        "matched_call_index": 0 if passed else None,
        "closest_call_index": 0,
        "unmatched_reason": None if passed else "no call of orders_lookup matched every argument",
        "passed": passed,
        "count": 1,
        "matching_calls": [0] if passed else [],
        "args": [
            {
                "arg": "order_id",
                "matcher": "literal" if passed else "fuzzy",
                "expected": expected,
                "actual": actual,
                "actual_present": True,
                "expected_normalized": None if passed else str(expected).lower(),
                "actual_normalized": None if passed else str(actual).lower(),
                "passed": passed,
                "reason": None if passed else f"{actual!r} does not match {expected!r}",
            }
        ],
    }


def _make_failing(turns: list[TurnRow], spec: RunSpec) -> None:
    """Turn 0 passes, turn 1 fails its tool assertion and code grader, the last is skipped."""
    if len(turns) < 2:
        turns[0].passed = False
        turns[0].outcome = "error"
        turns[0].kind_outcomes = {}
        turns[0].errors = ["TimeoutError: the model did not answer within 60 s"]
        return
    failed = turns[1]
    failed.passed = False
    failed.outcome = "failed"
    failed.kind_outcomes = dict(FAILING_KINDS)
    failed.tools_matched = False
    failed.response = spec.texts.get("response", failed.response)
    failed.tool_invocations[0]["args"] = {"order_id": "A-999"}
    failed.tool_invocations[0]["result"] = spec.texts.get(
        "tool_result", {"status": "unknown", "lines": [f"line {n}" for n in range(60)]}
    )
    failed.arg_match_details = [_assertion(passed=False, actual="A-999", expected="A-123")]
    failed.grader_details = {
        "refund_grader": spec.texts.get(
            "grader_details",
            {"parsed": None, "checks": [{"name": "currency", "ok": False}], "note": "no amount"},
        )
    }
    if len(turns) > 2:
        skipped = turns[-1]
        skipped.passed = False
        skipped.outcome = "skipped"
        skipped.kind_outcomes = {}
        skipped.skipped = True
        skipped.response = None
        skipped.tool_invocations = []
        skipped.arg_match_details = None
        skipped.grader_details = None
        skipped.errors = ["skipped: two consecutive session errors"]


def _metrics(run: Run, turn: TurnRow) -> list[MetricRow]:
    if turn.skipped:
        return []
    failed = not turn.passed
    return [
        MetricRow(
            run=run,
            turn=turn,
            case_index=turn.case.index,
            metric_name="rouge",
            kind="standard",
            score=0.31 if failed else 0.82,
            threshold=0.5,
            passed=not failed,
            outcome="failed" if failed else "passed",
            position=0,
        ),
        MetricRow(
            run=run,
            turn=turn,
            case_index=turn.case.index,
            metric_name="refund_grader",
            kind="code",
            score=0.0 if failed else 1.0,
            threshold=0.5,
            passed=not failed,
            outcome="failed" if failed else "passed",
            reasoning="amount matches" if not failed else "no amount in the response",
            position=1,
        ),
        MetricRow(
            run=run,
            turn=turn,
            case_index=turn.case.index,
            metric_name="politeness",
            kind="geval",
            score=None if failed else 0.9,
            threshold=0.7,
            passed=not failed,
            outcome="not_graded" if failed else "passed",
            error="judge returned invalid JSON" if failed else None,
            reasoning=None if failed else "Polite and precise.",
            model_used="gpt-4o-mini",
            evaluation_time_ms=850,
            position=2,
        ),
    ]


def failing_case(run: Run) -> CaseRow:
    return CaseRow.objects.filter(run=run, passed=False).order_by("index").first()  # type: ignore[return-value]


def make_not_graded(
    run: Run, index: int = 0, *, judge_error: str = "judge returned invalid JSON"
) -> CaseRow:
    """Turn the (passed) case ``index`` into one whose only failure is a judge that errored."""
    case = CaseRow.objects.get(run=run, index=index)
    case.passed = False
    case.outcome = "not_graded"
    case.errors = []
    case.tools_matched = True
    case.turns_passed = case.turn_count - 1
    case.metric_results = [
        {"metric_name": "rouge", "kind": "standard", "score": 0.8, "passed": True},
        {"metric_name": "politeness", "kind": "geval", "passed": False, "error": judge_error},
    ]
    case.save()
    turn = case.turns.order_by("-index").first()
    assert turn is not None
    TurnRow.objects.filter(pk=turn.pk).update(passed=False, outcome="not_graded")
    MetricRow.objects.filter(turn=turn, metric_name="politeness").update(
        passed=False, outcome="not_graded", score=None, error=judge_error
    )
    passed, graded = run.passed_cases - 1, run.passed_cases - 1 + run.failed_cases
    Run.objects.filter(pk=run.pk).update(  # as the recorder counts a not-graded case
        passed_cases=passed,
        not_graded_cases=F("not_graded_cases") + 1,
        pass_rate=round(passed * 100 / graded, 2) if graded else None,
    )
    return case


def make_cancelled(spec: RunSpec | None = None, project: AgentProject | None = None) -> Run:
    """A run cancelled while some cases were still pending (those are marked cancelled)."""
    spec = spec or RunSpec(cases=4, turns=1, failing=(), done=2)
    run = build_run(project, spec)
    CaseRow.objects.filter(run=run, status=CaseRow.Status.PENDING).update(
        status=CaseRow.Status.CANCELLED, outcome="cancelled", finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.CANCELLED,
        cases_done=spec.cases,
        cancelled_cases=spec.cases - (spec.cases if spec.done is None else spec.done),
    )
    run.refresh_from_db()
    return run


def make_legacy_turn(run: Run, index: int = 0) -> CaseRow:
    """Case ``index`` as an imported HoloDeck result: tool names only, no invocations or diff."""
    case = CaseRow.objects.get(run=run, index=index)
    TurnRow.objects.filter(case=case).update(
        tool_invocations=[],
        arg_match_details=None,
        tool_calls=["search_orders"],
        expected_tools=["search_orders", "refund"],
        tools_matched=False,
    )
    return case


def running_case(run: Run, index: int, *, written: int) -> CaseRow:
    """Case ``index`` of ``run`` made running, with its first ``written`` turns written (copies
    of case 0's, which is done)."""
    case = run.cases.get(index=index)
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.RUNNING, started_at=timezone.now(), claimed_by="h:1:1"
    )
    for turn in TurnRow.objects.filter(case__run=run, case__index=0).order_by("index")[:written]:
        turn.pk = None
        turn.case = case
        turn.save()
    Run.objects.filter(pk=run.pk).update(turns_done=F("turns_done") + written)
    case.refresh_from_db()
    return case


def write_turn(case: CaseRow, index: int) -> None:
    """Turn ``index`` of the running ``case`` written (a copy of case 0's), counted as the
    recorder counts it."""
    turn = TurnRow.objects.filter(case__run=case.run, case__index=0, index=index).get()
    turn.pk = None
    turn.case = case
    turn.save()
    Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") + 1)


def repeated_run(
    project: AgentProject | None,
    pass_probability: Iterable[float],
    *,
    repeats: int,
    seed: int,
    commit: str = "a" * 40,
    minutes: int = 0,
    exact: bool = False,
    scores: Iterable[float] | None = None,
) -> Run:
    """A finished run of one single-turn case per probability, each repeated ``repeats`` times;
    each repetition passes with its case's probability (numpy's generator seeded with ``seed``):
    the seeded fake agent of the significance tests. ``exact``: each case passes in exactly
    round(p × repeats) repetitions, in an order the generator shuffles (its known rate, drawn
    without sampling noise). ``scores``: per case, the mean of a standard metric "rouge" that
    each repetition's turn gets, with a spread of 0.05 drawn by the same generator."""
    import numpy

    rng = numpy.random.default_rng(seed)
    chances = list(pass_probability)
    if exact:
        draws = []
        for p in chances:
            passes = round(p * repeats)
            case = [True] * passes + [False] * (repeats - passes)
            rng.shuffle(case)
            draws.append([bool(ok) for ok in case])
    else:
        draws = [[bool(rng.random() < p) for _ in range(repeats)] for p in chances]
    passed = sum(1 for case in draws for ok in case if ok)
    total = len(chances) * repeats
    run = Run.objects.create(
        project=project,
        agent_name=project.name if project else "weather-agent",
        status=Run.Status.PASSED if passed == total else Run.Status.FAILED,
        git_commit=commit,
        git_branch="main",
        **RunOptions(repeats=repeats).fields(),
        total_cases=total,
        cases_done=total,
        total_turns=total,
        turns_done=total,
        passed_cases=passed,
        failed_cases=total - passed,
        created_at=timezone.now() + timedelta(minutes=minutes),
        finished_at=timezone.now() + timedelta(minutes=minutes),
    )
    cases = CaseRow.objects.bulk_create(
        CaseRow(
            run=run,
            index=index,
            repetition=repetition,
            name=f"case {index}",
            status=CaseRow.Status.DONE,
            turn_count=1,
            turns_passed=int(ok),
            passed=ok,
            outcome="passed" if ok else "failed",
        )
        for index, case in enumerate(draws)
        for repetition, ok in enumerate(case)
    )
    turns = TurnRow.objects.bulk_create(
        TurnRow(
            run=run,
            case=case,
            index=0,
            input=f"question {case.index}",
            response="answer",
            passed=bool(case.passed),
            outcome=case.outcome,
        )
        for case in cases
    )
    if scores is not None:
        means = list(scores)
        MetricRow.objects.bulk_create(
            MetricRow(
                run=run,
                turn=turn,
                case_index=turn.case.index,
                metric_name="rouge",
                kind="standard",
                score=min(1.0, max(0.0, means[turn.case.index] + rng.normal(0, 0.05))),
                threshold=0.5,
                passed=True,
                outcome="passed",
            )
            for turn in turns
        )
    return run


def make_repetition_fail(run: Run, *, index: int = 0, repetition: int = 1) -> Run:
    """Repetition ``repetition`` of case ``index`` failed its first turn, as a stochastic
    agent's would (the case is then flaky); the run's counters and summary are counted from
    the rows again, as they now are."""
    from runs.recorder import run_finish

    CaseRow.objects.filter(run=run, index=index, repetition=repetition).update(
        outcome="failed", passed=False, turns_passed=F("turns_passed") - 1
    )
    TurnRow.objects.filter(run=run, case__index=index, case__repetition=repetition, index=0).update(
        outcome="failed", passed=False
    )
    run_finish(run.pk)
    run.refresh_from_db()
    return run


def make_tool_args_failed(run: Run, index: int, *, turn: int = 0) -> CaseRow:
    """Case ``index`` (a passed multi-turn one) failed only a tool's arguments at turn ``turn``:
    the tool was called, with another order id, and every metric passed. Its verdicts are those
    ``runs.core.verdicts.outcomes`` decides (the turn and the case failed; their ``tools`` verdict
    failed, every other kind passed); the run's counters and summary are counted again."""
    from runs.recorder import run_finish

    case = CaseRow.objects.get(run=run, index=index)
    kinds = {**PASSING_KINDS, "tools": "failed"}
    TurnRow.objects.filter(case=case, index=turn).update(
        passed=False,
        outcome="failed",
        tools_matched=False,
        kind_outcomes=kinds,
        arg_match_details=[_assertion(passed=False, actual="A-999", expected=f"{index}-{turn}")],
    )
    CaseRow.objects.filter(pk=case.pk).update(
        passed=False,
        outcome="failed",
        tools_matched=False,
        kind_outcomes=kinds,
        turns_passed=F("turns_passed") - 1,
    )
    run_finish(run.pk)
    case.refresh_from_db()
    return case


def make_errored(run: Run, index: int = 0) -> CaseRow:
    """Case ``index`` (a finished multi-turn one) errored: its first turn passed, its second
    got no answer (the agent timed out), the rest were skipped; the run's counters and summary
    are counted from the rows again."""
    from runs.recorder import run_finish

    error = "TimeoutError: the model did not answer within 60 s"
    case = CaseRow.objects.get(run=run, index=index)
    CaseRow.objects.filter(pk=case.pk).update(
        outcome="error", passed=False, turns_passed=1, errors=[error], kind_outcomes={}
    )
    TurnRow.objects.filter(case=case, index=1).update(
        outcome="error", passed=False, errors=[error], response=None, kind_outcomes={}
    )
    TurnRow.objects.filter(case=case, index__gt=1).update(
        outcome="skipped", passed=False, skipped=True, response=None, kind_outcomes={}
    )
    MetricRow.objects.filter(turn__case=case, turn__index__gt=0).delete()
    run_finish(run.pk)
    case.refresh_from_db()
    return case


def make_stopped(run: Run, index: int, *, written: int) -> CaseRow:
    """Case ``index`` of the running ``run`` stopped by a cancel: its first ``written`` turns
    written (copies of case 0's), the rest skipped, the case "cancelled · stopped"; the run is
    cancelled (its pending cases "cancelled · not run") and settled as a worker settles it."""
    from runs.recorder import run_settle
    from runs.services.launch import run_cancel

    case = running_case(run, index, written=written)
    for turn in range(written, case.turn_count):
        TurnRow.objects.create(
            run=run,
            case=case,
            index=turn,
            input=f"What is the refund for order {index}-{turn}?",
            passed=False,
            outcome="skipped",
            skipped=True,
            errors=["skipped: the run was cancelled"],
        )
    assert run_cancel(run=Run.objects.get(pk=run.pk))
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.CANCELLED,
        outcome="cancelled",
        passed=False,
        turns_passed=written,
        finished_at=timezone.now(),
    )
    Run.objects.filter(pk=run.pk).update(
        cases_done=F("cases_done") + 1, cancelled_cases=F("cancelled_cases") + 1
    )
    assert run_settle(Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    case.refresh_from_db()
    return case


def make_given_up(run: Run, index: int, error: str) -> CaseRow:
    """Case ``index`` errored: its worker gave up on it (no result, no turns), as
    ``runs.recorder.case_fail`` stores it."""
    case = CaseRow.objects.get(run=run, index=index)
    TurnRow.objects.filter(case=case).delete()
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.ERROR, passed=False, outcome="error", errors=[error],
        turns_passed=0,
    )  # fmt: skip
    case.refresh_from_db()
    return case


def settled_run(
    project: AgentProject | None,
    *,
    cases: int,
    failing: Iterable[int] = (),
    not_graded: Iterable[int] = (),
    errored: Iterable[int] = (),
    judge_error: str = "judge returned invalid JSON",
    case_error: str = "WorkerLostError: the worker died",
) -> Run:
    """A run of ``cases`` two-turn cases, ended by the recorder (``run_finish``: its status,
    counters and summary counted from the rows): ``failing`` failed, ``not_graded`` could not be
    graded (a judge that errored with ``judge_error``), ``errored`` got no answer
    (``case_error``), the rest passed."""
    from runs.recorder import run_finish

    spec = RunSpec(cases=cases, turns=2, failing=failing, status=Run.Status.RUNNING)
    run = build_run(project, spec)
    for index in not_graded:
        make_not_graded(run, index, judge_error=judge_error)
    for index in errored:
        make_given_up(run, index, case_error)
    run_finish(run.pk)
    run.refresh_from_db()
    return run

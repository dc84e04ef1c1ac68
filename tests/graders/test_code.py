from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
import time
from typing import Any

import pytest

from graders.code import (
    GraderContext,
    GraderResult,
    _Workers,
    run_code_grader,
    run_code_grader_sync,
)
from graders.result import Grade


def context(**overrides: Any) -> GraderContext:
    fields: dict[str, Any] = {
        "turn_input": "What is 206588 - 181001?",
        "agent_response": "25587",
        "ground_truth": "25587",
        "tool_invocations": [
            {"name": "subtract", "args": {"a": 206588, "b": 181001}, "result": 25587, "error": None}
        ],
        "retrieval_context": None,
        "turn_index": 1,
        "test_case_name": "convfinqa-1",
        "turn_config": {"program": "subtract(206588, 181001)"},
    }
    fields.update(overrides)
    return GraderContext(**fields)


SUPPORTED = "; return a bool, a number in 0..1 or a GraderResult"


def grade(fn: Any, **kwargs: Any) -> Grade:
    kwargs.setdefault("name", "test")
    return asyncio.run(run_code_grader(fn, context(), **kwargs))


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_score_one_or_zero_and_passed_as_given(value: bool) -> None:
    result = grade(lambda ctx: value)

    assert (result.score, result.passed, result.error) == (float(value), value, None)


@pytest.mark.parametrize(("score", "passed"), [(0.5, True), (0.49, False), (1, True), (0, False)])
def test_a_number_without_threshold_passes_from_one_half(score: float, passed: bool) -> None:
    result = grade(lambda ctx: score)

    assert result.score == score
    assert result.passed is passed
    assert result.threshold is None


@pytest.mark.parametrize(("score", "threshold", "passed"), [(0.6, 0.7, False), (0.7, 0.7, True)])
def test_a_number_with_threshold_passes_from_the_threshold(
    score: float, threshold: float, passed: bool
) -> None:
    result = grade(lambda ctx: score, threshold=threshold)

    assert result.passed is passed
    assert result.threshold == threshold


def test_a_threshold_of_zero_is_honoured() -> None:
    assert grade(lambda ctx: 0.1, threshold=0.0).passed is True


def test_a_grader_result_carries_reason_and_details_into_the_grade() -> None:
    def grader(ctx: GraderContext) -> GraderResult:
        program = ctx.turn_config["program"]
        return GraderResult(
            score=0.25,
            reason="program differs",
            details={"expected_program": program, "steps": [1, 2]},
        )

    result = grade(grader)

    assert result.score == 0.25
    assert result.passed is False
    assert result.reason == "program differs"
    assert result.details == {"expected_program": "subtract(206588, 181001)", "steps": [1, 2]}


def test_an_explicit_passed_wins_over_the_score_rule() -> None:
    result = grade(lambda ctx: GraderResult(score=0.1, passed=True), threshold=0.9)

    assert result.passed is True


def test_an_async_grader_is_awaited() -> None:
    async def grader(ctx: GraderContext) -> float:
        await asyncio.sleep(0)
        return 0.75

    assert grade(grader).score == 0.75


def test_the_grader_sees_the_turn_it_grades() -> None:
    seen: list[GraderContext] = []

    def grader(ctx: GraderContext) -> bool:
        seen.append(ctx)
        return True

    grade(grader)

    [ctx] = seen
    assert ctx.turn_index == 1
    assert ctx.tool_invocations[0]["name"] == "subtract"
    assert ctx.test_case_name == "convfinqa-1"


def test_the_context_accepts_tool_call_records_as_dataclasses() -> None:
    @dataclasses.dataclass
    class Record:
        name: str
        args: dict[str, Any]
        result: Any = None
        error: str | None = None

    ctx = context(tool_invocations=[Record("add", {"a": 1})])

    assert ctx.tool_invocations == (
        {"name": "add", "args": {"a": 1}, "result": None, "error": None},
    )


def test_the_context_is_read_only_and_copies_what_it_is_given() -> None:
    config = {"nested": {"k": 1}}
    ctx = context(turn_config=config, retrieval_context=["doc"], agent_response=None)

    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.turn_index = 2  # type: ignore[misc]
    ctx.turn_config["nested"]["k"] = 2
    assert config["nested"]["k"] == 1
    assert ctx.retrieval_context == ("doc",)
    assert ctx.agent_response == ""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0.9", "unsupported return type str" + SUPPORTED),
        (None, "unsupported return type NoneType" + SUPPORTED),
        ({"score": 1}, "unsupported return type dict" + SUPPORTED),
        (1.5, "score 1.5 is outside 0..1"),
        (-0.1, "score -0.1 is outside 0..1"),
        (float("nan"), "score nan is outside 0..1"),
        (GraderResult(score="high"), "score must be a number, got str"),  # type: ignore[arg-type]
        (GraderResult(score=1.0, passed="yes"), "passed must be a bool or None, got str"),  # type: ignore[arg-type]
        (GraderResult(score=1.0, details=[1]), "details must be a dict, got list"),  # type: ignore[arg-type]
    ],
)
def test_an_unusable_return_value_is_an_error_not_a_score(value: Any, message: str) -> None:
    result = grade(lambda ctx: value)

    assert result.error == message
    assert result.score is None
    assert result.passed is False


def test_details_that_are_not_json_safe_are_an_error() -> None:
    result = grade(lambda ctx: GraderResult(score=1.0, details={"when": object()}))

    assert result.error is not None
    assert result.error.startswith("details are not JSON-safe: Object of type object")


def test_details_with_nan_are_not_json_safe() -> None:
    result = grade(lambda ctx: GraderResult(score=1.0, details={"x": float("nan")}))

    assert result.error is not None
    assert result.error.startswith("details are not JSON-safe")


def test_an_exception_is_an_error_named_by_its_type() -> None:
    def grader(ctx: GraderContext) -> float:
        raise KeyError("program")

    result = grade(grader)

    assert result.error == "KeyError: 'program'"
    assert result.score is None
    assert result.passed is False


def test_a_grader_that_calls_sys_exit_does_not_stop_the_run() -> None:
    def grader(ctx: GraderContext) -> float:
        raise SystemExit(3)

    assert grade(grader).error == "SystemExit: 3"


def test_a_slow_grader_times_out_and_the_run_moves_on() -> None:
    def grader(ctx: GraderContext) -> float:
        time.sleep(2)
        return 1.0

    start = time.perf_counter()
    result = grade(grader, timeout_s=0.2)
    elapsed = time.perf_counter() - start

    assert result.error == "timed out after 0.2s"
    assert result.score is None
    assert elapsed < 1.0
    assert 150 <= result.evaluation_time_ms < 1000


def test_a_blocking_grader_does_not_block_the_event_loop() -> None:
    ticks: list[float] = []

    async def scenario() -> Grade:
        async def ticker() -> None:
            for _ in range(5):
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.02)

        def grader(ctx: GraderContext) -> bool:
            time.sleep(1.0)
            return True

        result, _ = await asyncio.gather(run_code_grader(grader, context(), name="g"), ticker())
        return result

    result = asyncio.run(scenario())

    assert result.passed is True
    assert len(ticks) == 5
    # Five 20 ms ticks; a grader blocking the loop would stretch them past its 1 s sleep.
    assert ticks[-1] - ticks[0] < 0.6


def test_the_grade_records_how_long_grading_took() -> None:
    def grader(ctx: GraderContext) -> bool:
        time.sleep(0.05)
        return True

    assert grade(grader).evaluation_time_ms >= 40


# --- from synchronous code, and the reused worker threads ----------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda ctx: True,
        lambda ctx: 0.3,
        lambda ctx: GraderResult(score=0.9, reason="r", details={"k": [1]}),
        lambda ctx: "0.9",
        lambda ctx: GraderResult(score=1.0, details={"x": float("nan")}),
        lambda ctx: ctx.turn_config["missing"],
    ],
)
def test_the_sync_harness_grades_as_the_async_one(fn: Any) -> None:
    def shown(grade: Grade) -> Grade:
        return dataclasses.replace(grade, evaluation_time_ms=0)

    for timeout_s in (None, 5.0):
        sync = run_code_grader_sync(fn, context(), name="g", threshold=0.5, timeout_s=timeout_s)
        assert shown(sync) == shown(grade(fn, threshold=0.5, timeout_s=timeout_s))


def test_without_a_timeout_the_sync_harness_runs_the_grader_in_the_calling_thread() -> None:
    threads: list[int] = []

    def grader(ctx: GraderContext) -> bool:
        threads.append(threading.get_ident())
        return True

    run_code_grader_sync(grader, context(), name="g")
    assert threads == [threading.get_ident()]


def test_a_sync_grader_that_exits_is_an_error_in_the_calling_thread_too() -> None:
    def grader(ctx: GraderContext) -> float:
        raise SystemExit(3)

    assert run_code_grader_sync(grader, context(), name="g").error == "SystemExit: 3"


def test_an_async_grader_is_awaited_by_the_sync_harness() -> None:
    async def grader(ctx: GraderContext) -> float:
        await asyncio.sleep(0)
        return 0.75

    assert run_code_grader_sync(grader, context(), name="g").score == 0.75


def test_the_sync_harness_gives_up_after_the_timeout() -> None:
    def grader(ctx: GraderContext) -> float:
        time.sleep(1.5)
        return 1.0

    start = time.perf_counter()
    result = run_code_grader_sync(grader, context(), name="g", timeout_s=0.1)
    assert result.error == "timed out after 0.1s" and result.score is None
    assert time.perf_counter() - start < 1.0


def test_an_idle_grader_thread_is_reused_and_a_busy_one_never() -> None:
    threads: list[str] = []
    release = threading.Event()

    def record(ctx: GraderContext) -> bool:
        threads.append(threading.current_thread().name)
        return True

    def stuck(ctx: GraderContext) -> bool:
        release.wait(5)
        return True

    async def scenario() -> list[Grade]:
        first = await run_code_grader(record, context(), name="first")
        held = await run_code_grader(stuck, context(), name="stuck", timeout_s=0.05)
        # "stuck" still runs: the next call must get a thread of its own and finish.
        after = await run_code_grader(record, context(), name="after", timeout_s=2)
        return [first, held, after]

    first, held, after = asyncio.run(scenario())
    release.set()
    assert first.passed and after.passed and held.error == "timed out after 0.05s"
    # Each call's thread is named after its metric.
    assert threads == ["code-grader:first", "code-grader:after"]


def test_grader_threads_are_reused_from_one_call_to_the_next() -> None:
    workers = _Workers(max_idle=1)
    idents: queue.SimpleQueue[int] = queue.SimpleQueue()

    def once() -> int:
        workers.run(lambda: idents.put(threading.get_ident()), name="g")
        ident = idents.get(timeout=5)
        deadline = time.monotonic() + 5
        while workers.idle_threads == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # the thread goes back to the idle ones after its job
        return ident

    first, second = once(), once()
    assert first == second != threading.get_ident()
    assert workers.idle_threads == 1


def test_an_idle_grader_thread_ends_after_its_idle_time() -> None:
    workers = _Workers(idle_s=0.05)
    done = threading.Event()
    workers.run(done.set, name="short-lived")
    assert done.wait(5)
    deadline = time.monotonic() + 5
    while any(t.name == "short-lived" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert workers.idle_threads == 0

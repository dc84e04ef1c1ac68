"""The public grading API: grade one turn's stored facts against metric configs and tool
expectations as written in agent.yaml, and get back what the engine records.

The engine grades every live turn through ``grade_turn``; a re-grade grades stored transcripts
through it; a plugin or a user's own script can too. Django-free.

    from runs.core.engine.grading import TurnFacts, grade_turn_sync, metrics_from_yaml

    numeric = {"type": "standard", "metric": "numeric", "accept_percent": True}
    metrics = metrics_from_yaml([numeric], base_dir=".")
    facts = TurnFacts(input="What was the change?", response="14.1%", ground_truth="0.141")
    grades = grade_turn_sync(facts, metrics=metrics)
    for result in grades.metric_results:
        print(result.metric_name, result.score, result.passed)
    print(grades.passed)

``grade_turn`` is the async form (every metric kind, LLM judges included); ``grade_turn_sync``
runs deterministic and code graders only, and refuses judge metrics with a clear error. It grades
in the calling thread without an event loop, so with metrics and expectations built once (they
are read-only and may be shared between threads) a verdict costs little more than the graders'
own work (benchmarks/grading_bench.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from graders.tool_calls import assert_tools, tools_matched
from runs.core.agentconfig.metrics import Metric
from runs.core.agentconfig.resolve import CodeResolver
from runs.core.agentconfig.test_cases import Turn
from runs.core.engine.metrics import MetricRunner, TurnFacts, skip_reason
from runs.core.verdicts.kinds import JUDGE_KINDS
from runs.core.verdicts.outcomes import Outcome
from runs.core.wire.models import MetricResult, ToolInvocation, TurnResult

if TYPE_CHECKING:
    from runs.core.agentconfig.test_cases import ExpectedTool

__all__ = [
    "JUDGE_KINDS",
    "TurnFacts",
    "TurnGrades",
    "expectations_from_yaml",
    "grade_turn",
    "grade_turn_sync",
    "graded_turn",
    "metrics_from_yaml",
]


@dataclass
class TurnGrades:
    """What grading a turn produced, in the shapes the engine records."""

    metric_results: list[MetricResult] = field(default_factory=list)
    # metric name -> the code grader's ``details``
    grader_details: dict[str, Any] = field(default_factory=dict)
    # one record per tool assertion (the arg-match diff), and their roll-up
    arg_match_details: list[dict[str, Any]] | None = None
    tools_matched: bool | None = None
    # a ``fail_on_error`` metric that could not grade: why the case must stop
    stop_reason: str | None = None

    @property
    def passed(self) -> bool:
        """The grading's verdict (a turn also fails on its own errors, which are not grades)."""
        return self.tools_matched is not False and all(m.passed for m in self.metric_results)


def graded_turn(turn: TurnResult, grades: TurnGrades) -> TurnResult:
    """The turn with its grades (live or re-graded): the one place grades become turn fields.
    A turn with errors of its own fails whatever the grades say."""
    return turn.changed(
        tools_matched=grades.tools_matched,
        arg_match_details=grades.arg_match_details,
        metric_results=grades.metric_results,
        grader_details=grades.grader_details or None,
        passed=not turn.errors and grades.passed,
    )


async def grade_turn(
    facts: TurnFacts,
    *,
    metrics: Sequence[Metric] = (),
    expected_tools: Sequence[ExpectedTool] = (),
    runner: MetricRunner | None = None,
    judge: Any = None,
) -> TurnGrades:
    """Grade one turn: tool assertions against ``facts.tool_invocations`` (this turn's calls
    only), then each enabled metric that applies (metrics needing a ground truth or retrieval
    context are skipped without one, and not recorded).

    ``runner`` carries the agent (its judge model defaults); without one, judge metrics need
    their own ``model`` or ``judge``.
    """
    grades = _tool_grades(facts, expected_tools)
    metric_runner = runner or (_PLAIN_RUNNER if judge is None else MetricRunner(None, judge=judge))
    for metric in metrics:
        if metric.enabled and skip_reason(metric, facts) is None:
            _record(grades, metric, *await metric_runner.grade(metric, facts))
    return grades


def grade_turn_sync(
    facts: TurnFacts,
    *,
    metrics: Sequence[Metric] = (),
    expected_tools: Sequence[ExpectedTool] = (),
    runner: MetricRunner | None = None,
) -> TurnGrades:
    """``grade_turn`` for deterministic and code graders, from synchronous code: the same
    grades, graded right here without an event loop (a code grader with a ``timeout_ms`` runs
    in a worker thread). Safe to call from several threads at once with the same metrics and
    expectations: nothing of one call is kept for the next.

    Raises ValueError for an LLM-judge metric (use ``grade_turn``), and RuntimeError when
    called from inside a running event loop (await ``grade_turn`` there).
    """
    judged = [m.metric_name for m in metrics if m.kind in JUDGE_KINDS and m.enabled]
    if judged:
        raise ValueError(
            f"grade_turn_sync grades deterministic and code metrics only; {', '.join(judged)} "
            "need an LLM judge: await grade_turn(...) instead"
        )
    if asyncio._get_running_loop() is not None:
        raise RuntimeError(
            "grade_turn_sync() cannot be called from a running event loop: "
            "await grade_turn(...) instead"
        )
    grades = _tool_grades(facts, expected_tools)
    metric_runner = runner or _PLAIN_RUNNER
    for metric in metrics:
        if metric.enabled and skip_reason(metric, facts) is None:
            _record(grades, metric, *metric_runner.grade_sync(metric, facts))
    return grades


# Without an agent or a judge override a runner holds nothing: one serves every call.
_PLAIN_RUNNER = MetricRunner(None)


def _tool_grades(facts: TurnFacts, expected_tools: Sequence[ExpectedTool]) -> TurnGrades:
    """A turn's grades with its tool assertions."""
    grades = TurnGrades()
    if expected_tools:
        calls = [_invocation(call) for call in facts.tool_invocations]
        verdicts = assert_tools(expected_tools, calls)
        grades.tools_matched = tools_matched(verdicts)
        grades.arg_match_details = [verdict.to_wire() for verdict in verdicts] or None
    return grades


def _record(
    grades: TurnGrades, metric: Metric, result: MetricResult, details: dict[str, Any] | None
) -> None:
    if result.error is not None and metric.fail_on_error:
        # The agent.yaml asked that this metric fail when it cannot grade: failed, not "not
        # graded" (its turn and case then fail through it), and the case's other turns stop.
        result = result.model_copy(update={"outcome": Outcome.FAILED.value})
        if grades.stop_reason is None:
            grades.stop_reason = (
                f"fail_on_error: metric {metric.metric_name!r} could not grade: {result.error}"
            )
    grades.metric_results.append(result)
    if details is not None:
        grades.grader_details[metric.metric_name] = details


def metrics_from_yaml(items: Iterable[Mapping[str, Any]], *, base_dir: str | Path) -> list[Metric]:
    """Metric configs as written in agent.yaml (``evaluations.metrics`` items) -> validated
    metric objects; code graders are resolved relative to ``base_dir``. Raises ValueError
    naming the item and field at fault."""
    root = Path(base_dir).resolve()
    context = {"base_dir": root, "resolver": CodeResolver(root)}
    adapter = _metric_adapter()
    metrics = []
    for position, item in enumerate(items):
        try:
            metrics.append(adapter.validate_python(dict(item), context=context))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"metrics[{position}] {where}: {first['msg']}") from None
    return metrics


@functools.cache
def _metric_adapter() -> TypeAdapter[Metric]:
    """Built once (building one costs more than validating a metric with it); thread-safe to
    use."""
    return TypeAdapter(Metric)


def expectations_from_yaml(items: Iterable[Any]) -> list[ExpectedTool]:
    """``expected_tools`` as written in agent.yaml (names or ``{name, args, count}``)."""
    turn = Turn.model_validate({"input": "-", "expected_tools": list(items)})
    return turn.tool_expectations()


def _invocation(call: Any) -> Any:
    """Tool calls may be given as wire ``ToolInvocation`` objects or plain dicts. A dict that
    plainly is one (the engine's dumps, the documented ``{name, args, result}``) is read as is;
    anything else is validated (and refused) as before."""
    if not isinstance(call, Mapping):
        return call
    if type(call) is dict and _plain_call(call):
        return _Call(call["name"], call.get("args", {}))
    return ToolInvocation.model_validate(call)


@dataclass(frozen=True, slots=True)
class _Call:
    """What a tool assertion reads of a call."""

    name: str
    args: dict[str, Any]


_CALL_FIELDS = frozenset(ToolInvocation.model_fields)
_SCALARS = (str, float, bool, type(None))


def _plain_call(call: dict[str, Any]) -> bool:
    """True when ``ToolInvocation.model_validate(call)`` would accept the dict as it is."""
    if not call.keys() <= _CALL_FIELDS or type(call.get("name")) is not str:
        return False
    args = call.get("args", {})
    if type(args) is not dict or any(type(key) is not str for key in args):
        return False
    size, took, error = call.get("bytes"), call.get("duration_ms"), call.get("error")
    if size is None:
        # Its size is then measured with json.dumps, which refuses some values (a cycle, an
        # int of more than 4300 digits): only a scalar that it always takes is read as is.
        result = call.get("result")
        if type(result) is int:
            if result.bit_length() > 10_000:
                return False
        elif type(result) not in _SCALARS:
            return False
    elif type(size) is not int or size < 0:
        return False
    return (took is None or type(took) in (int, float)) and (error is None or type(error) is str)

"""One record of a run, checked on the source: result objects are built field by field in a
few declared places only, and the verdict words live in one module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULT_CLASSES = {"TurnResult", "MetricResult", "TestResult"}
# Where a turn, metric or case result may be built from its fields: the mapping (rows <-> wire),
# the engine's live turn and its grader -> metric conversion, and the roll-ups of report/build.
BUILDERS = {
    "runs/mapping.py",
    "runs/core/engine/executor.py",
    "runs/core/engine/metrics.py",
    "runs/core/wire/build.py",
}
# A call with this many keyword arguments or more is a field-by-field build.
FIELD_BY_FIELD = 4
VERDICT_WORDS = {"not_graded", "not-graded", "not graded", "errored", "pass", "fail", "absent"}
VERDICT_MODULE = "runs/core/verdicts/outcomes.py"


def source_files() -> list[Path]:
    files = [*ROOT.glob("runs/**/*.py"), *ROOT.glob("holodeck_web/**/*.py")]
    return sorted(path for path in files if "migrations" not in path.parts)


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def field_by_field_builds(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{relative(path)}:{node.lineno} builds {called_name(node)} field by field"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and called_name(node) in RESULT_CLASSES
        and len(node.keywords) >= FIELD_BY_FIELD
    ]


def verdict_words(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{relative(path)}:{node.lineno} spells the verdict {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in VERDICT_WORDS
    ]


def test_no_module_outside_the_declared_builders_builds_a_result_field_by_field() -> None:
    found = [
        line
        for path in source_files()
        if relative(path) not in BUILDERS
        for line in field_by_field_builds(path)
    ]
    assert found == []


def test_the_verdict_words_exist_in_one_module() -> None:
    found = [
        line
        for path in source_files()
        if relative(path) != VERDICT_MODULE
        for line in verdict_words(path)
    ]
    assert found == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "x = TurnResult(turn_index=0, input='a', passed=True, execution_time_ms=0)\n"
        "y = {'not_graded': 1}\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert field_by_field_builds(sample) == ["sample.py:1 builds TurnResult field by field"]
        assert verdict_words(sample) == ["sample.py:2 spells the verdict 'not_graded'"]
    finally:
        ROOT = saved

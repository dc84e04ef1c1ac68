"""Guards that bite, checked on the source: verdicts are asked of the outcome object, never
compared as words; result objects come from declared builders only; the pages (views, API
routers, template tags) write nothing themselves. Each check has a test below that it finds
the mutation it is there for, written as a developer would write it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from runs.core.verdicts.outcomes import RUN_ACTIVE_STATES, RUN_FINISHED_STATES, Outcome
from tests.architecture.test_one_record import BUILDERS, RESULT_CLASSES

ROOT = Path(__file__).resolve().parents[2]
VERDICT_MODULE = "runs/core/verdicts/outcomes.py"
# The words of a verdict or a run state, as stored.
STATE_WORDS = frozenset({o.value for o in Outcome} | {*RUN_ACTIVE_STATES, *RUN_FINISHED_STATES})
# What holds a verdict or a state on a row, a wire model or a view model.
STATE_FIELDS = frozenset({"outcome", "status", "state", "verdict"})
# The wire models' own module may validate its classes (a model's classmethods).
VALIDATORS = BUILDERS | {"runs/core/wire/models.py"}
# The layers that show rows: they read through selectors and write through services.
PAGE_LAYERS = (
    "runs/web/",
    "runs/api/",
    "runs/templatetags/",
    "runs/compare/pages/",
    "runs/compare/api.py",
)
# Calls that write rows (on a model instance, a queryset or a manager).
WRITE_CALLS = frozenset(
    {
        "save",
        "delete",
        "create",
        "bulk_create",
        "bulk_update",
        "get_or_create",
        "update_or_create",
        "_raw_delete",
    }
)
_WORD = "|".join(sorted(STATE_WORDS, key=len, reverse=True))
_FIELD = "|".join(sorted(STATE_FIELDS))
# ``{% if case.status == "cancelled" %}``, ``{% if outcome != "passed" %}``, either way round.
TEMPLATE_WORD = re.compile(
    rf"""\b(?:{_FIELD})\s*(?:==|!=)\s*["'](?:{_WORD})["']"""
    rf"""|["'](?:{_WORD})["']\s*(?:==|!=|in)\s*[\w.]*\b(?:{_FIELD})\b"""
)


def product_files() -> list[Path]:
    files = [*ROOT.glob("runs/**/*.py"), *ROOT.glob("holodeck_web/**/*.py")]
    return sorted(path for path in files if "migrations" not in path.parts)


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _holds_a_state(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in STATE_FIELDS
    if isinstance(node, ast.Name):
        return node.id in STATE_FIELDS
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value in STATE_FIELDS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and any(
            isinstance(arg, ast.Constant) and arg.value in STATE_FIELDS for arg in node.args
        )
    return False


def _words(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _words(element)


def state_comparisons(path: Path) -> list[str]:
    """``case.outcome == "failed"``, ``run.status in ("queued", "running")`` and the like."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any(map(_holds_a_state, sides)) and any(
            word in STATE_WORDS for side in sides for word in _words(side)
        ):
            found.append(f"{relative(path)}:{node.lineno} compares {ast.unparse(node)}")
    return found


def template_comparisons(path: Path) -> list[str]:
    return [
        f"{relative(path)}:{number} compares a verdict word: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "{%" in line and TEMPLATE_WORD.search(line)
    ]


def hand_validated_results(path: Path) -> list[str]:
    """``TurnResult.model_validate({...})``, ``TestResult.model_construct(...)``: a result
    built from a hand-made dict instead of through the mapping or the engine."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{relative(path)}:{node.lineno} builds {ast.unparse(node.func)} by hand"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"model_validate", "model_construct", "model_validate_json"}
        and _named(node.func.value) in RESULT_CLASSES
    ]


def _named(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def writes(path: Path) -> list[str]:
    """``row.save()``, ``qs.update(status=...)``, ``Model.objects.create(...)``: a write."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        # ``qs.update(field=value)`` writes; ``params.update(other)`` is a dict's update.
        orm_update = name == "update" and node.keywords and not node.args
        if name in WRITE_CALLS or orm_update:
            found.append(f"{relative(path)}:{node.lineno} writes: {ast.unparse(node)[:80]}")
    return found


def test_no_module_compares_a_verdict_or_a_state_as_a_word() -> None:
    """Outside the verdict module code asks the outcome (``Outcome(case.outcome).is_bad``,
    ``run.state.is_active``), so a new outcome or state is added in one place."""
    found = [
        line
        for path in product_files()
        if relative(path) != VERDICT_MODULE
        for line in state_comparisons(path)
    ]
    assert found == []


def test_no_template_compares_a_verdict_or_a_state_as_a_word() -> None:
    templates = sorted(ROOT.glob("templates/**/*.html"))
    assert len(templates) > 20
    found = [line for path in templates for line in template_comparisons(path)]
    assert found == []


def test_result_models_are_validated_from_dicts_only_by_their_builders() -> None:
    found = [
        line
        for path in product_files()
        if relative(path) not in VALIDATORS
        for line in hand_validated_results(path)
    ]
    assert found == []


def test_views_api_routers_and_template_tags_write_no_row() -> None:
    """They write through services; a GET writes nothing at all (test_reads_write_nothing)."""
    pages = [path for path in product_files() if relative(path).startswith(PAGE_LAYERS)]
    assert len(pages) > 20
    found = [line for path in pages for line in writes(path)]
    assert found == []


# --- each guard finds the mutation it is there for ------------------------------------------


def _sample(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_view_comparing_a_case_outcome_with_a_word_is_found(tmp_path: Path) -> None:
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        view = _sample(
            tmp_path,
            "runs/web/sample.py",
            "def case_page(request, case):\n"
            "    failed = case.outcome == 'failed'\n"
            "    live = run.status in ('queued', 'running')\n"
            "    fine = event.kind == 'error'\n",
        )
        assert state_comparisons(view) == [
            "runs/web/sample.py:2 compares case.outcome == 'failed'",
            "runs/web/sample.py:3 compares run.status in ('queued', 'running')",
        ]
        template = _sample(
            tmp_path,
            "templates/sample.html",
            '{% if case.outcome == "failed" %}x{% endif %}\n'
            '{% if "running" == run.status %}x{% endif %}\n'
            "{% if case.verdict.is_bad %}y{% endif %}\n"
            '{% if view.kind == "error" %}z{% endif %}\n',
        )
        assert [line.split(" compares")[0] for line in template_comparisons(template)] == [
            "templates/sample.html:1",
            "templates/sample.html:2",
        ]
    finally:
        ROOT = saved


def test_a_turn_result_validated_from_a_hand_made_dict_is_found(tmp_path: Path) -> None:
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        service = _sample(
            tmp_path,
            "runs/services/sample.py",
            "turn = wire.TurnResult.model_validate({'turn_index': 0, 'input': 'a'})\n"
            "other = TurnResult.model_validate(values)\n"
            "fine = TokenUsage.model_validate(usage)\n",
        )
        assert [line.split(" builds ")[0] for line in hand_validated_results(service)] == [
            "runs/services/sample.py:1",
            "runs/services/sample.py:2",
        ]
    finally:
        ROOT = saved


def test_a_view_saving_a_selectors_row_and_a_tag_updating_rows_are_found(tmp_path: Path) -> None:
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        view = _sample(
            tmp_path,
            "runs/web/sample.py",
            "def run_page(request, run_id):\n"
            "    run = selectors.run_get(run_id=run_id)\n"
            "    run.label = 'x'\n"
            "    run.save()\n"
            "    params.update(filters)\n",
        )
        assert [line.split(" writes")[0] for line in writes(view)] == ["runs/web/sample.py:4"]
        tag = _sample(
            tmp_path,
            "runs/templatetags/sample.py",
            "@register.filter\n"
            "def seen(case):\n"
            "    CaseResult.objects.filter(pk=case.pk).update(seen=True)\n"
            "    return case\n",
        )
        assert [line.split(" writes")[0] for line in writes(tag)] == [
            "runs/templatetags/sample.py:3"
        ]
    finally:
        ROOT = saved

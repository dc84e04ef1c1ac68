"""One name for one thing: no product class name is defined twice (a row and a wire model of a
turn were both ``TurnResult``; the rows are ``CaseRow``, ``TurnRow``, ``MetricRow`` now), and no
module is named ``rows.py``, a name three modules once shared for three different things."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.architecture.test_sizes import product_files, relative

# Names a framework requires: Django finds a management command by its class ``Command``.
REQUIRED_NAMES = {"Command"}


def classes_defined_twice(sources: dict[str, str]) -> dict[str, list[str]]:
    """Each top-level (or module-level nested in ``if``/``try``) class name defined in more than
    one place, with its places (``path:line``). Classes nested in a class (``Meta``) are the
    outer class's own."""
    places: dict[str, list[str]] = defaultdict(list)
    for path, source in sources.items():
        for node in _module_level(ast.parse(source).body):
            if isinstance(node, ast.ClassDef) and node.name not in REQUIRED_NAMES:
                places[node.name].append(f"{path}:{node.lineno}")
    return {name: found for name, found in sorted(places.items()) if len(found) > 1}


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.Try):
            found += _module_level(node.body) + _module_level(node.orelse)
    return found


def test_no_product_class_name_is_defined_twice() -> None:
    sources = {relative(path): path.read_text() for path in product_files()}
    assert classes_defined_twice(sources) == {}


def test_no_module_is_named_rows() -> None:
    """Three modules were named ``rows.py``, each meaning something else."""
    assert [relative(path) for path in product_files() if path.name == "rows.py"] == []


def test_the_check_finds_a_class_defined_twice_but_not_a_command_or_a_meta() -> None:
    sources = {
        "runs/models.py": "class TurnResult:\n    class Meta:\n        pass\n",
        "runs/core/wire/models.py": "class TurnResult:\n    class Meta:\n        pass\n",
        "runs/management/commands/a.py": "class Command:\n    pass\n",
        "runs/management/commands/b.py": "class Command:\n    pass\n",
    }
    assert classes_defined_twice(sources) == {
        "TurnResult": ["runs/models.py:1", "runs/core/wire/models.py:1"]
    }

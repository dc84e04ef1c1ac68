"""Imports at the top of the module, where a reader sees the module's real graph. An import
inside a function stays only where it is needed (a measured start-up cost of a heavy library,
an optional dependency, a real cycle with Django's app loading) and says why in a comment
starting ``# lazy:`` on its line or the line above; there are at most ``MOST`` of them."""

from __future__ import annotations

import ast

from tests.architecture.test_sizes import product_files, relative

MOST = 15
REASON = "# lazy:"


def function_imports(sources: dict[str, str]) -> tuple[list[str], list[str]]:
    """(every import inside a function body, those without a reason), as ``path:line``."""
    found, unexplained = [], []
    for path, source in sources.items():
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    place = f"{path}:{inner.lineno}"
                    if place in found:
                        continue
                    found.append(place)
                    said = lines[inner.lineno - 1] + (
                        lines[inner.lineno - 2] if inner.lineno > 1 else ""
                    )
                    if REASON not in said:
                        unexplained.append(place)
    return found, unexplained


def test_at_most_fifteen_imports_sit_in_functions_and_each_says_why() -> None:
    sources = {relative(path): path.read_text() for path in product_files()}
    found, unexplained = function_imports(sources)
    assert unexplained == []
    assert len(found) <= MOST, found


def test_the_check_finds_an_import_in_a_function_without_its_reason() -> None:
    source = (
        "import os\n"
        "def a():\n"
        "    from runs.models import Run\n"
        "def b():\n"
        "    # lazy: scipy.stats costs 0.4 s at import\n"
        "    from scipy import stats\n"
        "def c():\n"
        "    import sacrebleu  # lazy: only the BLEU metric needs it\n"
    )
    found, unexplained = function_imports({"runs/x.py": source})
    assert found == ["runs/x.py:3", "runs/x.py:6", "runs/x.py:8"]
    assert unexplained == ["runs/x.py:3"]

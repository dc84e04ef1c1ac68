"""Rooms, not halls: no product module over 600 lines, no function over 60 lines. A module or
a function that has a reason to be longer is named below with its reason; a new one must
either fit or be added here in review, with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
# "path" -> why it is longer than MAX_MODULE_LINES.
LONG_MODULES: dict[str, str] = {}
# "path:function" -> why it is longer than MAX_FUNCTION_LINES.
LONG_FUNCTIONS: dict[str, str] = {}


def product_files() -> list[Path]:
    files = [
        *ROOT.glob("runs/**/*.py"),
        *ROOT.glob("holodeck_web/**/*.py"),
        *ROOT.glob("graders/**/*.py"),
    ]
    return sorted(path for path in files if "migrations" not in path.parts)


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def long_modules(paths: list[Path]) -> dict[str, int]:
    lengths = {relative(path): len(path.read_text().splitlines()) for path in paths}
    return {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES}


def long_functions(paths: list[Path]) -> dict[str, int]:
    """Each function's lines from its ``def`` to its last line (nested ones counted apart)."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{relative(path)}:{node.name}"] = lines
    return found


def test_no_product_module_is_over_600_lines_but_the_named_exceptions() -> None:
    files = product_files()
    assert len(files) > 150
    assert set(long_modules(files)) == set(LONG_MODULES)


def test_no_product_function_is_over_60_lines_but_the_named_exceptions() -> None:
    assert set(long_functions(product_files())) == set(LONG_FUNCTIONS)


def test_the_size_checks_find_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        body = "\n".join(f"    x{i} = {i}" for i in range(61))
        sample = tmp_path / "sample.py"
        sample.write_text(f"def long_one():\n{body}\n\n\ndef short_one():\n    return 1\n")
        assert long_functions([sample]) == {"sample.py:long_one": 62}
        sample.write_text("x = 1\n" * 601)
        assert long_modules([sample]) == {"sample.py": 601}
    finally:
        ROOT = saved

"""Code graders and function tools are imported from the agent directory without collisions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import graders
from runs.core.agentconfig.resolve import CodeResolver, ResolveError


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def agent_with_helper(root: Path, answer: str) -> Path:
    """An agent whose grader imports a same-named helper module by plain name."""
    write(root / "grader_utils.py", f"ANSWER = {answer!r}\n")
    write(
        root / "graders" / "program.py",
        "import grader_utils\n\ndef check(ctx):\n    return grader_utils.ANSWER\n",
    )
    return root


def test_two_agents_with_same_named_helpers_each_get_their_own(tmp_path: Path) -> None:
    first = CodeResolver(agent_with_helper(tmp_path / "a", "first")).grader("graders.program:check")
    second = CodeResolver(agent_with_helper(tmp_path / "b", "second")).grader(
        "graders.program:check"
    )
    assert (first(None), second(None)) == ("first", "second")
    assert "grader_utils" not in sys.modules


def test_an_agent_graders_folder_does_not_shadow_the_project_package(tmp_path: Path) -> None:
    write(
        tmp_path / "graders" / "program.py",
        "from graders.result import Grade\n\ndef check(ctx):\n    return Grade(1.0, True)\n",
    )
    check = CodeResolver(tmp_path).grader("graders.program:check")
    assert check(None).passed is True
    assert sys.modules["graders"] is graders


def test_relative_imports_inside_an_agent_package_work(tmp_path: Path) -> None:
    write(tmp_path / "checks" / "__init__.py", "")
    write(tmp_path / "checks" / "util.py", "def double(x):\n    return 2 * x\n")
    write(
        tmp_path / "checks" / "main.py",
        "from .util import double\n\ndef run(x):\n    return double(x)\n",
    )
    assert CodeResolver(tmp_path).grader("checks.main:run")(21) == 42


def test_a_new_load_picks_up_an_edited_grader(tmp_path: Path) -> None:
    write(tmp_path / "g.py", "def check(ctx):\n    return 1\n")
    assert CodeResolver(tmp_path).grader("g:check")(None) == 1
    write(tmp_path / "g.py", "def check(ctx):\n    return 2\n")
    assert CodeResolver(tmp_path).grader("g:check")(None) == 2


def test_an_installed_module_is_used_when_the_agent_dir_has_none(tmp_path: Path) -> None:
    import json

    assert CodeResolver(tmp_path).grader("json:dumps") is json.dumps


def test_function_tools_load_from_files_outside_the_agent_dir(tmp_path: Path) -> None:
    write(tmp_path / "shared-tools" / "math.py", "def add(a, b):\n    return a + b\n")
    (tmp_path / "agent").mkdir()
    resolver = CodeResolver(tmp_path / "agent")
    assert resolver.function("../shared-tools/math.py", "add")(1, 2) == 3


@pytest.mark.parametrize(
    ("source", "reference", "message"),
    [
        ("def f(x):\n    return x\n", "g.f", "must look like 'module.path:callable'"),
        ("def f(x):\n    return x\n", "g:missing", "module 'g' has no attribute 'missing'"),
        ("f = 3\n", "g:f", "'f' is not callable (it is of type int)"),
        ("raise RuntimeError('boom')\n", "g:f", "importing 'g' failed: RuntimeError: boom"),
        ("def f(:\n", "g:f", "importing 'g' failed: SyntaxError"),
    ],
)
def test_broken_graders_raise_a_one_line_cause(
    tmp_path: Path, source: str, reference: str, message: str
) -> None:
    write(tmp_path / "g.py", source)
    with pytest.raises(ResolveError) as caught:
        CodeResolver(tmp_path).grader(reference)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)

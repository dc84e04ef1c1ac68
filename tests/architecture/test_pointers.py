"""No dead pointer: every module a template names (``runs.web.transcripts.case_transcript``, in
a comment saying who renders it) exists and defines what follows its name, and every template
a template names (``runs/_pager.html``) exists. A template once named ``runs.web.case_rows``,
which never existed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.architecture.test_sizes import ROOT

DOTTED = re.compile(r"(?<![\w./])runs(?:\.[A-Za-z_]\w*)+")
TEMPLATE = re.compile(r"(?<![\w./])runs/[\w/]+\.html")


def defined_names(path: Path) -> set[str]:
    """The names a module defines at its top level: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def dead_pointers(texts: dict[str, str], root: Path) -> list[str]:
    dead = []
    for place, text in sorted(texts.items()):
        for match in DOTTED.finditer(text):
            if not _resolves(match.group(0).split("."), root):
                dead.append(f"{place}: {match.group(0)}")
        for match in TEMPLATE.finditer(text):
            if not (root / "templates" / match.group(0)).is_file():
                dead.append(f"{place}: {match.group(0)}")
    return dead


def _resolves(parts: list[str], root: Path) -> bool:
    """The longest prefix that is a module, then (if anything follows) a name it defines."""
    for end in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:end])
        module = (
            base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        )
        if module.is_file():
            rest = parts[end:]
            return not rest or rest[0] in defined_names(module) or (base / rest[0]).exists()
    return False


def test_every_module_and_template_a_template_names_exists() -> None:
    texts = {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for path in (ROOT / "templates").rglob("*.html")
    }
    assert len(texts) > 40
    assert dead_pointers(texts, ROOT) == []


def test_the_check_finds_a_module_a_name_and_a_template_that_do_not_exist() -> None:
    texts = {
        "a.html": "{# rendered by runs.web.case_rows #}",
        "b.html": "{# runs.web.transcripts.case_transcript and runs.web.transcripts.gone #}",
        "c.html": "{% include 'runs/_pager.html' %}{% include 'runs/_gone.html' %}",
    }
    assert dead_pointers(texts, ROOT) == [
        "a.html: runs.web.case_rows",
        "b.html: runs.web.transcripts.gone",
        "c.html: runs/_gone.html",
    ]

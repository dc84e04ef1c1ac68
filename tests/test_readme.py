"""What the README says about ``dev.py`` is what ``dev.py`` does: its "Two commands" section names
two commands, ``dev.py run``'s arguments reach ``manage.py serve`` (the port), and ``dev.py test``
installs axe-core with npm before pytest starts (the accessibility test needs it)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.core.management import load_command_class

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def dev(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """dev.py as a module, with its virtualenv step made a no-op (the tests call no installer)."""
    spec = importlib.util.spec_from_file_location("dev_under_test", REPO / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ensure_venv", lambda: None)
    return module


def test_the_two_commands_section_names_two_commands() -> None:
    named = set(re.findall(r"dev\.py (\w+)", section("Two commands")))
    assert named == {"run", "test"}
    assert "make " not in section("Two commands")
    more = set(re.findall(r"dev\.py (\w+)", section("More development commands")))
    assert {"check", "setup"} <= more


def test_the_readme_says_how_to_change_dev_py_runs_port_and_serve_takes_it(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = re.search(r"`python3 dev\.py run (--addr [\d.]+:\d+)`", section("Two commands"))
    assert found, "the README does not say how to choose dev.py run's address"
    argv = found.group(1).split()
    started: list[list[str]] = []
    monkeypatch.setattr(dev, "manage", lambda *args: None)
    monkeypatch.setattr(dev.os, "chdir", lambda path: None)
    monkeypatch.setattr(dev.os, "execv", lambda path, args: started.append(args))
    dev.cmd_run(argv)
    assert started[0][1:] == ["manage.py", "serve", *argv]
    parser = load_command_class("runs", "serve").create_parser("manage.py", "serve")
    assert parser.parse_args(argv).addr == argv[1]


def test_dev_py_test_installs_axe_core_with_npm_before_pytest_and_the_readme_says_so(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[list[str], Any]] = []

    def call(args: list[str], cwd: Any = None, **_: Any) -> int:
        calls.append((args, cwd))
        return 0

    monkeypatch.setattr(dev, "installed_axe_version", lambda: None)  # a fresh checkout
    monkeypatch.setattr(dev.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(dev.subprocess, "call", call)
    assert dev.cmd_test(["-k", "a11y"]) == 0
    (npm, npm_dir), (pytest_args, _) = calls
    assert npm[:2] == ["/usr/bin/npm", "ci"] and npm_dir == dev.AXE_DIR
    assert pytest_args[1:3] == ["-m", "pytest"] and pytest_args[-2:] == ["-k", "a11y"]
    text = " ".join(section("Two commands").split())
    assert "`dev.py test` then installs axe-core" in text and "needs `npm`" in text


def test_dev_py_test_without_npm_says_the_accessibility_test_will_skip(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(dev, "installed_axe_version", lambda: None)
    monkeypatch.setattr(dev.shutil, "which", lambda name: None)
    monkeypatch.setattr(dev.subprocess, "call", lambda args, **_: ran.append(args) or 0)
    assert dev.cmd_test([]) == 0
    assert "npm is absent, so the accessibility test will skip" in capsys.readouterr().out
    assert [args[1:3] for args in ran] == [["-m", "pytest"]]

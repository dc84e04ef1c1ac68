"""Every command, module, environment variable and health-check path that ``Dockerfile``,
``docker-compose.yml`` and ``docker-compose.rabbitmq.yml`` name exists in the project: the files
are parsed, and each name is looked up where the project defines it (management commands, the
Celery app and its sub-commands, gunicorn's options and config module, the WSGI callable, the
URL routes, the variables the code reads and the README's settings table)."""

from __future__ import annotations

import importlib
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery import Celery
from celery.bin.celery import celery as celery_cli
from django.core.management import get_commands
from django.urls import Resolver404, resolve
from gunicorn.config import Config as GunicornConfig

REPO = Path(__file__).resolve().parents[1]
DEPLOY_FILES = ("Dockerfile", "docker-compose.yml", "docker-compose.rabbitmq.yml")
# Set by docker, not by the project: a command may read them.
PLATFORM_VARIABLES = {"HOSTNAME"}
SOURCE_DIRS = ("holodeck_web", "runs", "graders")
SEPARATORS = {"&&", "||", ";", "|"}
ASSIGNMENT = re.compile(r"([A-Z][A-Z0-9_]*)=(.*)", re.DOTALL)
REFERENCE = re.compile(r"\$\$?\{?([A-Z][A-Z0-9_]*)")
URL = re.compile(r"https?://[^/'\"\s]+(/[^'\"\s]*)")


@dataclass
class Named:
    """What one deploy file names: the command lines it runs and the variables it sets/reads."""

    commands: list[list[str]] = field(default_factory=list)
    variables: set[str] = field(default_factory=set)

    def add_shell(self, script: str) -> None:
        """A shell command line: split at ``&&``/``;``/``|``, ``sh -c`` opened up, leading
        ``NAME=value`` assignments counted as variables."""
        self.variables.update(REFERENCE.findall(script))
        command: list[str] = []
        for word in [*shlex.split(script), ";"]:
            if word in SEPARATORS:
                self.add_argv(command)
                command = []
            else:
                command.append(word)

    def add_argv(self, argv: list[str]) -> None:
        while argv and (assignment := ASSIGNMENT.fullmatch(argv[0])):
            self.variables.add(assignment.group(1))
            argv = argv[1:]
        if argv[:2] in (["sh", "-c"], ["/bin/sh", "-c"]):
            self.add_shell(argv[2])
        elif argv:
            self.variables.update(REFERENCE.findall(" ".join(argv)))
            self.commands.append(argv)

    def add_healthcheck(self, test: str | list[str]) -> None:
        if isinstance(test, str):
            self.add_shell(test)
        elif test[0] == "CMD":
            self.add_argv(list(test[1:]))
        elif test[0] == "CMD-SHELL":
            self.add_shell(test[1])


# -- reading the files -------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> Iterator[tuple[str, str]]:
    """(INSTRUCTION, its arguments), continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    for line in "\n".join(lines).replace("\\\n", " ").splitlines():
        if line.strip():
            instruction, _, rest = line.strip().partition(" ")
            yield instruction.upper(), rest.strip()


def add_docker_command(named: Named, rest: str) -> None:
    """A RUN/CMD argument: the JSON exec form or the shell form."""
    if rest.startswith("["):
        named.add_argv(json.loads(rest))
    else:
        named.add_shell(rest)


def read_dockerfile(text: str) -> Named:
    named = Named()
    for instruction, rest in dockerfile_instructions(text):
        if instruction == "ENV":
            named.variables.update(word.split("=", 1)[0] for word in shlex.split(rest))
        elif instruction in {"RUN", "CMD", "ENTRYPOINT"}:
            add_docker_command(named, rest)
        elif instruction == "HEALTHCHECK":
            add_docker_command(named, rest.split(" CMD ", 1)[1].strip())
    return named


def read_compose(text: str) -> Named:
    """The project's services only: a service with ``image:`` runs someone else's image
    (PostgreSQL, Redis, RabbitMQ) whose variables and commands are its own."""
    named = Named()
    for service in (yaml.safe_load(text).get("services") or {}).values():
        if not isinstance(service, dict) or "image" in service:
            continue
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        for name, value in environment.items():
            named.variables.add(name)
            named.variables.update(REFERENCE.findall(str(value)))
        command = service.get("command")
        if isinstance(command, str):
            named.add_shell(command)
        elif command:
            named.add_argv(list(command))
        healthcheck = service.get("healthcheck") or {}
        if healthcheck.get("test"):
            named.add_healthcheck(healthcheck["test"])
    return named


def read(name: str, text: str) -> Named:
    return read_dockerfile(text) if name == "Dockerfile" else read_compose(text)


# -- checking the names ------------------------------------------------------------------------


def importable(dotted: str) -> Any:
    """The object at ``module:attr`` (or the module at ``module``); None when it is not."""
    module_name, _, attr = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attr, None) if attr else module


def program(argv: list[str]) -> tuple[str, list[str]]:
    """(program, its arguments) with ``python -m X`` read as ``X``."""
    if argv[0] in {"python", "python3"} and argv[1:2] == ["-m"]:
        return argv[2], argv[3:]
    return argv[0], argv[1:]


def manage_py_problems(args: list[str]) -> list[str]:
    if not args:
        return ["manage.py without a command"]
    if args[0] not in get_commands():
        return [f"manage.py {args[0]}: no such management command"]
    return []


def celery_problems(args: list[str]) -> list[str]:
    problems = []
    app_name = args[args.index("-A") + 1] if "-A" in args else None
    app = importable(app_name) if app_name else None
    if not isinstance(getattr(app, "celery_app", app), Celery):
        problems.append(f"celery -A {app_name}: not this project's Celery app")
    rest = args[args.index("-A") + 2 :] if app_name else args
    if not rest or rest[0] not in celery_cli.commands:
        problems.append(f"celery {' '.join(rest[:1])}: no such celery command")
    return problems


def gunicorn_problems(args: list[str]) -> list[str]:
    try:
        options = GunicornConfig().parser().parse_args(args)
    except SystemExit:
        return [f"gunicorn {' '.join(args)}: gunicorn refuses these options"]
    problems = []
    if options.config and not importable(options.config.removeprefix("python:")):
        problems.append(f"gunicorn --config {options.config}: the module does not import")
    for app in options.args:
        if not callable(importable(app)):
            problems.append(f"gunicorn {app}: not an importable WSGI callable")
    return problems


def python_c_problems(code: str) -> list[str]:
    """URLs a ``python -c`` probe fetches must be routes of the dashboard."""
    problems = []
    for path in URL.findall(code):
        try:
            resolve(path)
        except Resolver404:
            problems.append(f"{path}: no such URL route")
    return problems


def command_problems(argv: list[str]) -> list[str]:
    name, args = program(argv)
    if name in {"python", "python3"} and args[:1] == ["manage.py"]:
        return manage_py_problems(args[1:])
    if name in {"python", "python3"} and args[:1] == ["-c"]:
        return python_c_problems(args[1])
    if name == "celery":
        return celery_problems(args)
    if name == "gunicorn":
        return gunicorn_problems(args)
    return []  # apt-get, pip, rm: the image's own tools


def settings_table_variables() -> set[str]:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Settings (environment)", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row)}


def source_text() -> str:
    return "\n".join(
        path.read_text() for folder in SOURCE_DIRS for path in (REPO / folder).rglob("*.py")
    )


def variable_problems(variables: set[str]) -> list[str]:
    documented, source = settings_table_variables(), source_text()
    problems = []
    for name in sorted(variables - PLATFORM_VARIABLES):
        if f'"{name}"' not in source:
            problems.append(f"{name}: the project never reads this variable")
        if name not in documented:
            problems.append(f"{name}: not in the README's settings table")
    return problems


def problems_of(name: str, text: str) -> list[str]:
    named = read(name, text)
    found = [problem for argv in named.commands for problem in command_problems(argv)]
    return [f"{name}: {problem}" for problem in found + variable_problems(named.variables)]


# -- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DEPLOY_FILES)
def test_every_command_variable_and_path_a_deploy_file_names_exists(name: str) -> None:
    assert problems_of(name, (REPO / name).read_text()) == []


def test_the_parser_finds_what_the_deploy_files_run() -> None:
    """So that the test above cannot pass by reading nothing."""
    dockerfile = read_dockerfile((REPO / "Dockerfile").read_text())
    compose = read_compose((REPO / "docker-compose.yml").read_text())
    run = {tuple(program(argv)[1][:2]) for argv in compose.commands}
    assert {("manage.py", "migrate"), ("manage.py", "ensure_admin")} <= run
    assert {("manage.py", "register_project"), ("-A", "holodeck_web")} <= run
    assert {"gunicorn", "celery"} <= {program(argv)[0] for argv in compose.commands}
    assert any(argv[:2] == ["python", "-c"] for argv in compose.commands)  # web's health check
    assert any(argv[0] == "gunicorn" for argv in dockerfile.commands)
    assert any(argv[1:3] == ["manage.py", "collectstatic"] for argv in dockerfile.commands)
    assert {"DATABASE_URL", "HOLODECK_WEB_WORKERS", "HOLODECK_STATIC_ROOT"} <= (
        compose.variables | dockerfile.variables
    )


@pytest.mark.parametrize(
    ("name", "old", "new", "problem"),
    [
        (
            "docker-compose.yml",
            "manage.py ensure_admin",
            "manage.py ensure_admins",
            "ensure_admins",
        ),
        ("Dockerfile", "manage.py collectstatic", "manage.py collect_static", "collect_static"),
        ("docker-compose.yml", "-A holodeck_web worker", "-A holodeck worker", "-A holodeck"),
        ("docker-compose.yml", "holodeck_web worker", "holodeck_web wroker", "wroker"),
        ("docker-compose.yml", "inspect ping", "inspekt ping", "inspekt"),
        ("Dockerfile", "gunicorn_conf", "gunicorn_config", "gunicorn_config"),
        ("docker-compose.yml", "wsgi:application", "wsgi:app", "wsgi:app"),
        ("docker-compose.yml", "--bind 0.0.0.0:8000", "--bnid 0.0.0.0:8000", "--bnid"),
        ("docker-compose.yml", "/healthz", "/health", "/health"),
        ("Dockerfile", "/healthz", "/healthz/live", "/healthz/live"),
        ("docker-compose.yml", "HOLODECK_WEB_WORKERS:", "HOLODECK_WEB_WORKER:", "WEB_WORKER"),
        ("docker-compose.yml", "REDIS_URL:", "REDIS_URI:", "REDIS_URI"),
        ("Dockerfile", "HOLODECK_STATIC_ROOT=", "HOLODECK_STATIC_DIR=", "STATIC_DIR"),
        (
            "docker-compose.rabbitmq.yml",
            "CELERY_BROKER_URL:",
            "CELERY_BROKER:",
            "CELERY_BROKER",
        ),
    ],
)
def test_it_reports_a_wrong_name_written_into_a_deploy_file(
    name: str, old: str, new: str, problem: str
) -> None:
    text = (REPO / name).read_text()
    assert old in text
    problems = problems_of(name, text.replace(old, new))
    assert any(problem in found for found in problems), problems

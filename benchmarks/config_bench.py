"""Big configs: validating and launching a ~5 MB agent.yaml (17,747 multi-turn cases), and the
start of ``validate_agent`` on the small example.

    .venv/bin/python benchmarks/config_bench.py                       # temporary SQLite
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/config_bench.py --use-configured-db
    .venv/bin/python benchmarks/config_bench.py --repo /tmp/old-checkout   # another checkout

The agent is the ConvFinQA example (its tools, graders, prompt and transcript) with a generated
agent.yaml: the 133 dialogues of ``../shared/fixtures/convfinqa/convfinqa_subset_retrieval.yaml``
repeated under distinct names, one or two turns a case, each turn with its ground truth, expected
tools with fuzzy and regex argument matchers, and some per-turn metrics. Measured (medians):

- validate, big: ``manage.py validate_agent <dir>`` as a subprocess, wall time;
- launch: ``run_create`` from the call to the run queued (snapshot, validation, the run and its
  case rows, the start task sent), and the launch API (``POST /api/v1/runs`` with a token,
  Django test client); each launch follows an edit of agent.yaml, so each one packs, stores and
  unpacks a new snapshot as a launch after an edit does;
- validate, small: ``manage.py validate_agent examples/convfinqa``, wall and CPU time, and the
  import time and heavy packages imported (``python -X importtime``); the same for
  ``run_agent`` on the example (``--no-store --no-results-file --quiet``).

Targets: validate ≤ 5 s, launch ≤ 3 s. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]
FIXTURE = HERE.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_retrieval.yaml"
CASES = 17_747
VALIDATE_TARGET_S, LAUNCH_TARGET_S = 5.0, 3.0
HEAVY = ("django.test", "ninja", "semantic_kernel", "deepeval", "claude_agent_sdk", "openai")

HEADER = """\
# A ConvFinQA-style agent with {cases} generated test cases (benchmarks/config_bench.py).
name: convfinqa-big
description: Answers conversational numeric questions about annual-report excerpts.

model:
  provider: scripted
  name: scripted-convfinqa
  transcript: transcript.yaml

instructions:
  file: prompts/system.md

tools:
  - {{type: function, name: lookup, file: tools/finance.py, function: lookup}}
  - {{type: function, name: add, file: tools/finance.py, function: add}}
  - {{type: function, name: subtract, file: tools/finance.py, function: subtract}}
  - {{type: function, name: multiply, file: tools/finance.py, function: multiply}}
  - {{type: function, name: divide, file: tools/finance.py, function: divide}}
  - {{type: function, name: greater, file: tools/finance.py, function: greater}}
  - {{type: function, name: exp, file: tools/finance.py, function: exp}}

evaluations:
  metrics:
    - type: standard
      metric: numeric
      name: answer_numeric
      accept_percent: true
      absolute_tolerance: 0.0001
      relative_tolerance: 0.005
    - type: code
      name: program_equivalence
      grader: graders.program:program_equivalent
      threshold: 0.75

execution:
  llm_timeout: 30
  parallel_test_cases: 4

"""

_OPS = ("subtract", "divide", "add", "multiply", "greater", "exp")
_MAX_INPUT = 40


def _scalar(value: object) -> str:
    """A double-quoted YAML scalar (JSON's string syntax is YAML's)."""
    return json.dumps(str(value), ensure_ascii=False)


def _question(text: str) -> str:
    """The fixture's question, cut at a word to keep ~17,747 cases near 5 MB."""
    words = " ".join(text.split())
    if len(words) <= _MAX_INPUT:
        return words
    return words[:_MAX_INPUT].rsplit(" ", 1)[0] + "?"


def _turn_lines(turn: dict[str, Any], first: bool, n: int) -> list[str]:
    """A fixture turn with expected tools (argument matchers) and, now and then, a metric."""
    program = str((turn.get("turn_config") or {}).get("turn_program", ""))
    numbers = re.findall(r"-?\d+(?:\.\d+)?", program)
    lines = [
        f"- input: {_scalar(_question(str(turn['input'])))}",
        f"  ground_truth: {_scalar(turn['ground_truth'])}",
    ]
    tools: list[str] = []
    op = next((o for o in _OPS if program.startswith(o)), None)
    if first:
        tools.append(
            f"{{name: lookup, args: {{metric: {{fuzzy: revenue}}, year: {2000 + n % 20}}}}}"
        )
    elif op is not None and numbers:
        pattern = _scalar(numbers[0] + r"(\.0+)?")
        tools.append(f"{{name: {op}, args: {{a: {{regex: {pattern}}}}}}}")
    elif op is not None:
        tools.append(op)
    if tools:
        lines.append(f"  expected_tools: [{', '.join(tools)}]")
    if n % 9 == 0:
        lines.append("  evaluations: [{type: standard, metric: equality}]")
    lines.append(f"  turn_config: {{turn_program: {_scalar(program)}}}")
    return lines


def big_agent(directory: Path, cases: int = CASES) -> Path:
    """The ConvFinQA example's files and a generated agent.yaml of ``cases`` test cases."""
    shutil.copytree(
        HERE / "examples" / "convfinqa", directory, ignore=shutil.ignore_patterns("results")
    )
    dialogues = yaml.load(FIXTURE.read_text(), Loader=yaml.CSafeLoader)
    lines = [HEADER.format(cases=cases), "test_cases:"]
    for n in range(cases):
        dialogue = dialogues[n % len(dialogues)]
        turns = dialogue["turns"]
        start = (n // len(dialogues)) % len(turns)
        lines += [f"- name: {_scalar(dialogue['name'] + ' #' + str(n // len(dialogues)))}"]
        lines += ["  turns:"]
        for i, turn in enumerate(turns[start : start + 1 + (n % 5 == 0)]):
            lines += [f"  {line}" for line in _turn_lines(turn, i == 0, n)]
    (directory / "agent.yaml").write_text("\n".join(lines) + "\n")
    return directory


# --- subprocess measurements -----------------------------------------------------------------


def _env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env["HOLODECK_DATA_DIR"] = str(scratch / "data")
    env.setdefault("DATABASE_URL", f"sqlite:///{scratch / 'cli.sqlite3'}")
    return env


def timed_command(
    args: list[str], repo: Path, env: dict[str, str], *, ok: tuple[int, ...] = (0,)
) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stdout+stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + done.stderr


def import_profile(args: list[str], repo: Path, env: dict[str, str]) -> tuple[float, list[str]]:
    """(total import time in s, the heavy packages imported) of ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    total_us = 0
    heavy: set[str] = set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not match:
            continue
        total_us += int(match.group(1))  # self times add up to the whole
        name = match.group(4)
        heavy.update(h for h in HEAVY if name == h or name.startswith(h + "."))
    return total_us / 1e6, sorted(heavy)


# --- in-process launch -----------------------------------------------------------------------


def launch_times(agent_dir: Path, repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds per launch: ``run_create`` and the launch API, each after an edit of
    agent.yaml."""
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from runs.models import AgentProject, Run
    from runs.services.launch import run_create
    from runs.services.tokens import token_create

    name = f"bench-{os.getpid()}"
    user = get_user_model().objects.create_user(name, password="x", is_staff=True)
    project = AgentProject.objects.create(
        name=name, directory=str(agent_dir), agent_file="agent.yaml"
    )
    _, secret = token_create(user=user, name="bench")
    client = Client(headers={"authorization": f"Bearer {secret}"})
    agent_yaml = agent_dir / "agent.yaml"
    original = agent_yaml.read_text()
    edits = iter(range(10**6))

    def edit() -> None:  # a new tree: the launch packs, stores and unpacks a new snapshot
        agent_yaml.write_text(original + f"# edit {os.getpid()}-{next(edits)}\n")

    def direct() -> None:
        run = run_create(project=project, user=user)
        assert run.status == Run.Status.QUEUED and run.total_cases > 0

    def api() -> None:
        response = client.post(
            "/api/v1/runs", {"project": project.pk}, content_type="application/json"
        )
        assert response.status_code == 201, response.content[:2000]

    steps: dict[str, Callable[[], None]] = {"run_create": direct, "launch API": api}
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in steps}
    try:
        for _ in range(repeat):
            for label, step in steps.items():
                edit()
                started, cpu = time.perf_counter(), time.process_time()
                step()
                times[label].append((time.perf_counter() - started, time.process_time() - cpu))
    finally:
        agent_yaml.write_text(original)
        Run.objects.filter(project=project).delete()
        project.delete()
        user.delete()
    return times


# --- report ----------------------------------------------------------------------------------


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}"


def _target(values: list[float], target: float) -> str:
    return f"≤ {target:g} s {'ok' if statistics.median(values) <= target else 'MISSED'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="the checkout to measure")
    parser.add_argument("--cases", type=int, default=CASES)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each big measurement")
    parser.add_argument("--small-repeat", type=int, default=5)
    parser.add_argument("--use-configured-db", action="store_true")
    parser.add_argument("--skip", action="append", default=[], choices=["validate", "launch"])
    args = parser.parse_args()
    repo = args.repo.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="holodeck-config-bench-"))
    try:
        return run(args, repo, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, repo: Path, scratch: Path) -> int:
    agent_dir = big_agent(scratch / "big", args.cases)
    size = (agent_dir / "agent.yaml").stat().st_size
    env = _env(scratch)
    print(f"checkout: {repo}; load average: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    print(f"agent.yaml: {size / 1e6:.2f} MB, {args.cases} test cases\n")
    missed = False
    print("| measurement | wall s (median) | CPU s (median) | runs | target (wall) |")
    print("| --- | ---: | ---: | ---: | --- |")
    manage = str(repo / "manage.py")
    if "validate" not in args.skip:
        walls, cpus = [], []
        for _ in range(args.repeat):
            wall, cpu, output = timed_command([manage, "validate_agent", str(agent_dir)], repo, env)
            if not output.startswith("OK:"):
                raise SystemExit(output[:2000])
            walls.append(wall)
            cpus.append(cpu)
        missed |= statistics.median(walls) > VALIDATE_TARGET_S
        print(
            f"| validate_agent, {size / 1e6:.1f} MB | {_median(walls)} | {_median(cpus)} "
            f"| {len(walls)} | {_target(walls, VALIDATE_TARGET_S)} |"
        )
    if "launch" not in args.skip:
        sys.path.insert(0, str(repo))
        os.chdir(repo)  # Celery puts the working directory first on sys.path
        os.environ.update(env)
        os.environ.pop("REDIS_URL", None)
        os.environ.pop("CELERY_BROKER_URL", None)
        if not args.use_configured_db:
            os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "holodeck_web.settings")
        import django

        django.setup()
        from django.db import connection

        for label, pairs in launch_times(agent_dir, args.repeat).items():
            walls = [wall for wall, _ in pairs]
            missed |= statistics.median(walls) > LAUNCH_TARGET_S
            print(
                f"| {label}, {size / 1e6:.1f} MB, {connection.vendor} | {_median(walls)} "
                f"| {_median([cpu for _, cpu in pairs])} | {len(walls)} "
                f"| {_target(walls, LAUNCH_TARGET_S)} |"
            )
    example = str(repo / "examples" / "convfinqa")
    commands = {
        "validate_agent": [manage, "validate_agent", example],
        "run_agent": [
            manage,
            "run_agent",
            str(Path(example) / "agent.yaml"),
            "--no-store",
            "--no-results-file",
            "--quiet",
        ],
    }
    print("\n| small example | wall s | CPU s | imports s | heavy packages imported |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, command in commands.items():
        walls, cpus = [], []
        for _ in range(args.small_repeat):
            wall, cpu, _ = timed_command(command, repo, env, ok=(0, 1))
            walls.append(wall)
            cpus.append(cpu)
        imports = [import_profile(command, repo, env) for _ in range(3)]
        heavy = imports[0][1]
        print(
            f"| {name} | {_median(walls)} | {_median(cpus)} "
            f"| {_median([seconds for seconds, _ in imports])} | {', '.join(heavy) or 'none'} |"
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())

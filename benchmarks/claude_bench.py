"""The Claude backend end to end: ConvFinQA dialogues through `manage.py run_agent` against the
tests' fake Anthropic server (tests/core/backends/fake_llm_servers.py), with the real bundled Claude
Code CLI: a process per test case, or, within the run, one process for several cases
(`HOLODECK_CLAUDE_CASES_PER_PROCESS`, docs/backends.md).

    .venv/bin/python benchmarks/claude_bench.py [--dialogues 20] [--rounds 2] [--parallel 1 4]
                                                [--no-store] [--repo PATH]

The agent (written to a temporary folder) has the ConvFinQA example's arithmetic tools as
python function tools and a numeric metric; its test cases are the first N dialogues of the
ConvFinQA fixture (20 dialogues: 85 turns). The fake answers from each turn's program: a turn
whose program is one operation on two numbers (``divide(43, 10592)``) gets a real tool round
trip (``tool_use`` of that tool, then the tool's result as the answer: 30 of the 85 turns);
any other turn is answered with its ground truth.

Each run is the whole command in a fresh process (Python, Django, the agent load, the run, the
result file; by default the run is also stored in a fresh SQLite database, ``--no-store`` skips
that), timed by its wall clock. Reported per parallelism (median of the rounds):

- s/turn: the command's wall time over the turns it ran;
- CPU s: user + system time of the command and every process it started (the Claude CLIs);
- Claude processes started: children of the command whose name is ``claude`` (``/proc`` is
  sampled every 50 ms: a CLI lives far longer than that);
- conversations: distinct ``X-Claude-Code-Session-Id`` the fake saw (one per case);
- case start -> first request: from the moment a case gets its slot (the previous case's end at
  parallel 1; in general the end of the case that freed the slot, the engine starting cases in
  order) to the fake's first request of its conversation; the first ``parallel`` cases (which
  start with the command) are left out;
- session start: the median ``session_start_ms`` of the cases (absent before that field);
- verdicts: passed / failed / errored cases.

``--repo PATH`` runs the command of another checkout (e.g. a ``git worktree`` of the commit
before) against the same fake and workload.
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
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.core.backends.fake_llm_servers import (  # noqa: E402
    Exchange,
    FakeAnthropic,
    _blocks,
    _clean,
    _tool_result_text,
)

DEFAULT_FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"
MODEL = "claude-sonnet-4-5"
OPERATIONS = ("add", "subtract", "multiply", "divide")
ONE_OPERATION = re.compile(
    r"^\s*(add|subtract|multiply|divide)\(\s*([-\d.]+%?)\s*,\s*([-\d.]+%?)\s*\)\s*$"
)

# The example agent's own arithmetic tools (the bench uses add/subtract/multiply/divide).
EXAMPLE_TOOLS = REPO / "examples" / "convfinqa" / "tools" / "finance.py"


@dataclass(frozen=True)
class PlannedTurn:
    """What the fake answers to one turn: a tool round trip, else this text."""

    answer: str
    tool: str | None = None
    args: dict[str, float] | None = None


def number(text: str) -> float:
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def plan_turn(turn: dict[str, Any]) -> PlannedTurn:
    program = str((turn.get("turn_config") or {}).get("turn_program") or "")
    answer = str(turn.get("ground_truth") or "0")
    match = ONE_OPERATION.match(program)
    if match is None:
        return PlannedTurn(answer)
    op, a, b = match.groups()
    return PlannedTurn(answer, tool=op, args={"a": number(a), "b": number(b)})


def dialogue_key(text: str) -> str:
    return _clean(text)[-300:]


@dataclass
class ConvFinQAFake(FakeAnthropic):
    """The tests' fake Anthropic API, answering ConvFinQA dialogues from their programs.

    A conversation is recognised by its first user message (the dialogue's first input), its
    turn by the number of user messages with text so far. Every model request is logged with
    its wall-clock time and the CLI's session id."""

    plans: dict[str, tuple[str, list[PlannedTurn]]] = field(default_factory=dict)
    log: list[tuple[float, str, str]] = field(default_factory=list)  # (time, session, case)

    def handle(self, handler: BaseHTTPRequestHandler, exchange: Exchange) -> None:
        body = exchange.body
        if isinstance(body, dict) and body.get("messages"):
            case = self._case_of(body["messages"])
            session = exchange.headers.get("X-Claude-Code-Session-Id", "")
            with self._lock:
                self.log.append((time.time(), session, case))
        super().handle(handler, exchange)

    def _case_of(self, messages: list[dict[str, Any]]) -> str:
        first = _texts(messages[0])
        return self.plans.get(dialogue_key(first), ("?", []))[0]

    def reply(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        last = messages[-1]
        results = [b for b in _blocks(last) if b.get("type") == "tool_result"]
        if results:
            return [{"type": "text", "text": _tool_result_text(results[-1]).split()[0]}]
        _, planned = self.plans.get(dialogue_key(_texts(messages[0])), ("?", []))
        asked = sum(1 for m in messages if m.get("role") == "user" and _texts(m))
        if not 0 < asked <= len(planned):
            return [{"type": "text", "text": "0"}]
        turn = planned[asked - 1]
        offered = {t["name"].rsplit("__", 1)[-1]: t["name"] for t in tools if "name" in t}
        if turn.tool is None or turn.tool not in offered:
            return [{"type": "text", "text": turn.answer}]
        return [
            {
                "type": "tool_use",
                "id": f"toolu_{len(self.log):08d}{asked:04d}",
                "name": offered[turn.tool],
                "input": turn.args,
            }
        ]


def _texts(message: dict[str, Any]) -> str:
    """The user's own text of a message (the CLI's reminders and tool results left out)."""
    if any(b.get("type") == "tool_result" for b in _blocks(message)):
        return ""
    return " ".join(
        t
        for t in (_clean(b.get("text", "")) for b in _blocks(message) if b.get("type") == "text")
        if t
    )


# --------------------------------------------------------------------------- the agent


def write_agent(directory: Path, dialogues: list[dict[str, Any]], endpoint: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EXAMPLE_TOOLS, directory / "tools.py")
    (directory / "cases.yaml").write_text(yaml.safe_dump(dialogues, sort_keys=False))
    config = {
        "name": "convfinqa-claude-bench",
        "model": {
            "provider": "anthropic",
            "name": MODEL,
            "temperature": 0,
            "endpoint": endpoint,
            "api_key": "bench-key-not-secret",
        },
        "instructions": {"inline": "Answer the question about the filing. Use the tools."},
        "tools": [
            {"type": "function", "name": op, "file": "tools.py", "function": op}
            for op in OPERATIONS
        ],
        "evaluations": {
            "metrics": [
                {
                    "type": "standard",
                    "metric": "numeric",
                    "relative_tolerance": 0.01,
                    "accept_percent": True,
                }
            ]
        },
        "execution": {"llm_timeout": 60},
        "test_cases_file": "cases.yaml",
    }
    path = directory / "agent.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# --------------------------------------------------------------------------- one run


# A CLI lives at least ~0.3 s. The sampler shares this process (and its GIL) with the fake
# server's thread, so it samples no more often than it needs to (it was 10 ms).
SAMPLE_S = 0.05


class ChildCounter:
    """Counts the distinct ``claude`` children of a process by sampling ``/proc``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ChildCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        tasks = Path(f"/proc/{self.pid}/task")
        while not self._stop.wait(SAMPLE_S):
            try:
                children = {
                    int(pid)
                    for task in tasks.iterdir()
                    for pid in (task / "children").read_text().split()
                }
            except OSError:
                continue
            for pid in children - self.seen:
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "claude":
                        self.seen.add(pid)
                except OSError:
                    pass


@dataclass
class RunResult:
    wall_s: float
    cpu_s: float
    exit_code: int
    turns: int
    processes: int
    conversations: int
    first_request_s: list[float]
    session_start_ms: list[int]
    verdicts: dict[str, int]
    stderr: str


def run_command(
    repo: Path, agent: Path, fake: ConvFinQAFake, parallel: int, tmp: Path, *, store: bool
) -> RunResult:
    results = tmp / f"results-{parallel}-{time.monotonic_ns()}"
    export = results / "export.json"
    env = dict(os.environ, HOLODECK_DATA_DIR=str(tmp / "data"))
    command = [
        sys.executable,
        "manage.py",
        "run_agent",
        str(agent),
        "--parallel-test-cases",
        str(parallel),
        "--results-dir",
        str(results),
        "--output",
        str(export),
        "--quiet",
    ]
    if not store:
        command.append("--no-store")
    with fake._lock:
        fake.log.clear()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with ChildCounter(process.pid) as counter:
        _, stderr = process.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime"))
    report = json.loads(export.read_text())["report"] if export.exists() else {"results": []}
    cases = report["results"]
    with fake._lock:
        log = list(fake.log)
    return RunResult(
        wall_s=wall,
        cpu_s=cpu,
        exit_code=process.returncode,
        turns=sum(len(case["turns"] or [1]) for case in cases),
        processes=len(counter.seen),
        conversations=len({session for _, session, _ in log}),
        first_request_s=first_requests(cases, log, parallel),
        session_start_ms=[c["session_start_ms"] for c in cases if c.get("session_start_ms")],
        verdicts=verdict_counts(cases),
        stderr=stderr,
    )


def first_requests(
    cases: list[dict[str, Any]], log: list[tuple[float, str, str]], parallel: int
) -> list[float]:
    """Per case (after the first ``parallel``): its slot's start to its first model request."""
    first: dict[str, float] = {}
    for at, _, name in sorted(log):
        first.setdefault(name, at)
    ends = sorted(datetime.fromisoformat(c["timestamp"]).timestamp() for c in cases)
    out = []
    for index, case in enumerate(cases):
        if index < parallel or case["test_name"] not in first:
            continue
        out.append(first[case["test_name"]] - ends[index - parallel])
    return out


def verdict_counts(cases: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "error": 0}
    for case in cases:
        outcome = case.get("outcome") or ("passed" if case["passed"] else "failed")
        key = outcome if outcome in counts else "failed"
        counts[key] += 1
    return counts


# --------------------------------------------------------------------------- main


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parallel", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose command runs")
    parser.add_argument("--no-store", action="store_true", help="run_agent --no-store")
    args = parser.parse_args()

    dialogues = yaml.safe_load(args.fixture.read_text())[: args.dialogues]
    plans = {
        dialogue_key(d["turns"][0]["input"]): (d["name"], [plan_turn(t) for t in d["turns"]])
        for d in dialogues
    }
    turns = sum(len(d["turns"]) for d in dialogues)
    round_trips = sum(1 for _, p in plans.values() for t in p if t.tool)
    fake = ConvFinQAFake(plans=plans).start()
    rows: dict[int, list[RunResult]] = {parallel: [] for parallel in args.parallel}
    try:
        with tempfile.TemporaryDirectory(prefix="claude-bench-") as tmp_name:
            tmp = Path(tmp_name)
            agent = write_agent(tmp / "agent", dialogues, fake.url)
            store = not args.no_store
            if store:
                subprocess.run(
                    [sys.executable, "manage.py", "migrate", "-v", "0"],
                    cwd=args.repo,
                    env=dict(os.environ, HOLODECK_DATA_DIR=str(tmp / "data")),
                    check=True,
                )
            for _ in range(args.rounds):  # alternate the parallelisms, round after round
                for parallel in args.parallel:
                    result = run_command(args.repo, agent, fake, parallel, tmp, store=store)
                    if result.turns != turns:
                        print(result.stderr[-3000:], file=sys.stderr)
                    rows[parallel].append(result)
                    print(
                        f"  parallel {parallel}: {result.wall_s:.2f}s wall, {result.cpu_s:.1f}s "
                        f"CPU, exit {result.exit_code}, {result.processes} processes",
                        file=sys.stderr,
                    )
    finally:
        fake.stop()

    load = os.getloadavg()
    print(
        f"\n{len(dialogues)} dialogues, {turns} turns, {round_trips} tool round trips; "
        f"{args.rounds} rounds (medians); store={'yes' if not args.no_store else 'no'}; "
        f"repo {args.repo}; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    print(
        "| parallel | wall s | s/turn | CPU s | Claude processes | conversations | case start → "
        "first request (median / max) | session start ms (median) | passed / failed / errored |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for parallel, results in rows.items():
        wall = median([r.wall_s for r in results])
        firsts = [s for r in results for s in r.first_request_s]
        starts = [s for r in results for s in r.session_start_ms]
        last = results[-1]
        print(
            f"| {parallel} | {wall:.2f} | {wall / turns:.3f} | "
            f"{median([r.cpu_s for r in results]):.1f} | "
            f"{median([r.processes for r in results]):.0f} | "
            f"{median([r.conversations for r in results]):.0f} | "
            f"{median(firsts):.3f} s / {max(firsts, default=float('nan')):.3f} s | "
            f"{median(starts):.0f} | "
            f"{last.verdicts['passed']} / {last.verdicts['failed']} / {last.verdicts['error']} |"
        )


if __name__ == "__main__":
    main()

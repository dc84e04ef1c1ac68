"""One run, every surface: the scenario the "one record of a run" tests share.

``mixed_run`` executes a small real agent (scripted provider, real graders, the dashboard's
launch and task path, eager Celery) whose four cases end passed, failed, not graded (a code
grader that crashes) and failed by an agent error, so its turns are passed, failed, not graded
and errored. ``contradictory_import`` imports a HoloDeck file whose summary says 11 passed and
1 failed while all 12 of its results passed (the results are the truth).

``MIXED`` and ``IMPORTED`` are the numbers every surface must show: the run page, compare, the
trends data, the API, the JSON / Markdown / JUnit exports and the CI gate's Markdown. Each
surface's test reads its numbers into a ``Numbers`` and compares it with these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from runs.services.launch import run_create
from runs.services.projects import project_register

AGENT_YAML = """\
name: one-record
model:
  provider: scripted
  name: scripted-one-record
  transcript: transcript.yaml
instructions:
  inline: Answer with a number.
evaluations:
  metrics:
    - {type: standard, metric: numeric, name: answer_numeric}
test_cases:
  - name: all_good
    input: "6 times 7?"
    ground_truth: "42"
  - name: wrong_answer
    input: "6 times 7?"
    ground_truth: "42"
  - name: grader_down
    turns:
      - {input: "6 times 7?", ground_truth: "42"}
      - input: "and plus 1?"
        ground_truth: "43"
        evaluations: [{type: code, name: program_check, grader: "checks:boom"}]
  - name: agent_breaks
    turns:
      - {input: "6 times 7?", ground_truth: "42"}
      - {input: "and plus 1?", ground_truth: "43"}
"""

TRANSCRIPT = """\
cases:
  all_good: [{response: "42"}]
  wrong_answer: [{response: "41"}]
  grader_down: [{response: "42"}, {response: "43"}]
  agent_breaks: [{response: "42"}, {error: "model overloaded"}]
"""

CHECKS = """\
def boom(ctx):
    raise RuntimeError("the grader is down")
"""


@dataclass(frozen=True)
class Numbers:
    """What a surface says about a run. ``cases``/``turns``: outcome -> count (passed, failed,
    error, not_graded; zero counts may be left out); ``metrics``: name -> (turns evaluated,
    passed, failed, not graded); ``pass_rate``: the text shown ("33.3%"), "–" for none."""

    cases: dict[str, int]
    turns: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    pass_rate: str = ""

    def nonzero(self) -> Numbers:
        return Numbers(
            cases={k: v for k, v in self.cases.items() if v},
            turns={k: v for k, v in self.turns.items() if v},
            metrics=self.metrics,
            pass_rate=self.pass_rate,
        )


MIXED = Numbers(
    cases={"passed": 1, "failed": 2, "not_graded": 1},
    turns={"passed": 3, "failed": 1, "error": 1, "not_graded": 1},
    metrics={"answer_numeric": (4, 3, 1, 0), "program_check": (1, 0, 0, 1)},
    pass_rate="33.3%",
)
IMPORTED = Numbers(
    cases={"passed": 12},
    turns={"passed": 12},
    metrics={"answer_numeric": (12, 12, 0, 0)},
    pass_rate="100%",
)


def write_agent(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "agent.yaml").write_text(AGENT_YAML)
    (directory / "transcript.yaml").write_text(TRANSCRIPT)
    (directory / "checks.py").write_text(CHECKS)
    return directory / "agent.yaml"


@pytest.fixture
def mixed_run(tmp_path: Path, eager_celery: None) -> Run:
    """The four-case run, executed through the dashboard's launch path."""
    project = project_register(agent_path=write_agent(tmp_path / "one-record"))
    run = run_create(project=project, user=None)
    run.refresh_from_db()
    assert not run.is_active, "the eager run should have finished"
    return run


def contradictory_eval_run() -> dict[str, Any]:
    """A HoloDeck result file: 12 results, all passed; its summary says 11 passed, 1 failed."""
    results = [
        {
            "test_name": f"case {index}",
            "test_input": "6 times 7?",
            "agent_response": "42",
            "ground_truth": "42",
            "metric_results": [
                {"metric_name": "answer_numeric", "kind": "standard", "score": 1.0,
                 "threshold": None, "passed": True}
            ],
            "passed": True,
            "execution_time_ms": 10,
            "timestamp": "2026-11-30T10:00:00+00:00",
        }
        for index in range(12)
    ]  # fmt: skip
    return {
        "report": {
            "agent_name": "one-record",
            "agent_config_path": "agent.yaml",
            "results": results,
            "summary": {"total_tests": 12, "passed": 11, "failed": 1, "pass_rate": 91.67,
                        "total_duration_ms": 120, "metrics_evaluated": {"answer_numeric": 12},
                        "average_scores": {"answer_numeric": 1.0}},
            "timestamp": "2026-11-30T10:00:00+00:00",
            "holodeck_version": "0.7.1",
        },
        "metadata": {"holodeck_version": "0.7.1", "git_commit": "a" * 40},
    }  # fmt: skip


@pytest.fixture
def contradictory_import(tmp_path: Path) -> Run:
    from runs.services.history import runs_import

    path = tmp_path / "contradictory.json"
    path.write_text(json.dumps(contradictory_eval_run()))
    outcome = runs_import([path])
    assert len(outcome.imported) == 1
    return outcome.imported[0]


# --- reading the numbers off a page --------------------------------------------------------------
# Pages mark each number of a run's summary with ``data-summary`` (``cases.passed``,
# ``turns.not_graded``, ``pass_rate``, and inside an element carrying ``data-metric="<name>"``:
# ``metric.evaluated``, ``metric.passed``, ``metric.failed``, ``metric.not_graded``). Where a page
# shows several runs (compare), an ancestor (or the element itself) carries ``data-run="<id>"``.


def html_numbers(html: str, run_id: int | None = None) -> Numbers:
    """The summary numbers a page shows (for one run when ``run_id`` is given)."""
    from html.parser import HTMLParser

    found: list[tuple[dict[str, str], str]] = []

    class Reader(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.stack: list[tuple[str, dict[str, str]]] = []
            self.open: list[tuple[dict[str, str], list[str]]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            inherited = dict(self.stack[-1][1]) if self.stack else {}
            own = {k: v or "" for k, v in attrs if k in ("data-run", "data-metric", "data-summary")}
            inherited.pop("data-summary", None)
            inherited.update(own)
            if tag in ("br", "img", "input", "meta", "link", "hr", "col", "wbr"):
                return
            self.stack.append((tag, inherited))
            if "data-summary" in own:
                self.open.append((inherited, []))

        def handle_endtag(self, tag: str) -> None:
            while self.stack:
                open_tag, attrs = self.stack.pop()
                if "data-summary" in attrs and self.open and self.open[-1][0] is attrs:
                    scope, texts = self.open.pop()
                    found.append((scope, "".join(texts).strip()))
                if open_tag == tag:
                    break

        def handle_data(self, data: str) -> None:
            for _, texts in self.open:
                texts.append(data)

    reader = Reader()
    reader.feed(html)
    cases: dict[str, int] = {}
    turns: dict[str, int] = {}
    metrics: dict[str, list[int]] = {}
    pass_rate = ""
    for scope, text in found:
        if run_id is not None and scope.get("data-run") != str(run_id):
            continue
        key = scope["data-summary"]
        if key == "pass_rate":
            pass_rate = text
        elif key.startswith("cases."):
            cases[key.removeprefix("cases.")] = int(text)
        elif key.startswith("turns."):
            turns[key.removeprefix("turns.")] = int(text)
        elif key.startswith("metric."):
            column = ("evaluated", "passed", "failed", "not_graded").index(key.split(".")[1])
            metrics.setdefault(scope["data-metric"], [0, 0, 0, 0])[column] = int(text)
    return Numbers(
        cases=cases,
        turns=turns,
        metrics={name: (v[0], v[1], v[2], v[3]) for name, v in metrics.items()},
        pass_rate=pass_rate,
    ).nonzero()

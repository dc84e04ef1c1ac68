"""Hostile input gets a bounded, clear error: YAML alias bombs, duplicate keys, duplicate test case
names, and the bounds that still accept every sensible value."""

from __future__ import annotations

import resource
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.limits import MAX_YAML_ALIASES
from runs.core.agentconfig.loader import load_agent
from tests.core.agentconfig.agent_dirs import base_agent, make_agent_dir

HEAD = """\
name: bomb
model: {provider: scripted, name: s}
instructions: hi
test_cases:
- name: lol
  turns:
  - input: hi
"""

# The classic "billion laughs": 9 levels of 9 aliases, 9^9 (387 million) strings once expanded,
# about 400 bytes of YAML.
BILLION_LAUGHS = """\
    turn_config:
      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
      f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
      g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
      h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
      i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def problems_of(path: Path) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ={})
    return caught.value.problems


def cases_file_agent(tmp_path: Path, name: str, payload: str) -> Path:
    agent = base_agent()
    del agent["test_cases"]
    agent["test_cases_file"] = name
    path = make_agent_dir(tmp_path, agent)
    (tmp_path / name).write_text(payload)
    return path


# --- YAML aliases ------------------------------------------------------------------------------


def test_a_billion_laughs_file_is_refused_quickly_and_in_little_memory(tmp_path: Path) -> None:
    path = make_agent_dir(tmp_path, HEAD + BILLION_LAUGHS)
    assert path.stat().st_size < 750
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    started = time.perf_counter()
    try:
        problems = problems_of(path)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before

    assert elapsed < 2
    assert peak < 50 * 2**20
    assert rss_growth < 50 * 2**10
    assert [str(p) for p in problems] == [
        "agent.yaml: invalid YAML at line 13, column 14: "
        "aliases expand to too many nodes (more than 10000)"
    ]


def test_more_than_the_alias_budget_is_refused_at_the_first_alias_too_many(tmp_path: Path) -> None:
    aliases = "\n".join(f"      k{i}: *x" for i in range(MAX_YAML_ALIASES + 1))
    text = HEAD + "    turn_config:\n      x: &x 1\n" + aliases + "\n"
    [problem] = problems_of(make_agent_dir(tmp_path, text))
    line = HEAD.count("\n") + 2 + MAX_YAML_ALIASES + 1
    assert (problem.file, problem.field_path) == ("agent.yaml", "")
    assert problem.message == (
        f"invalid YAML at line {line}, column 13: too many aliases (more than {MAX_YAML_ALIASES})"
    )


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    [problem] = problems_of(make_agent_dir(tmp_path, HEAD + "    turn_config: &c {me: *c}\n"))
    assert problem.message == (
        "invalid YAML at line 8, column 26: alias *c refers to a node that contains it"
    )


def test_a_bomb_in_a_test_cases_file_names_that_file(tmp_path: Path) -> None:
    payload = "- name: lol\n  turns:\n  - input: hi\n" + BILLION_LAUGHS
    [problem] = problems_of(cases_file_agent(tmp_path, "suite.yaml", payload))
    assert problem.file == "suite.yaml"
    assert "aliases expand to too many nodes" in problem.message


def test_a_few_ordinary_anchors_and_aliases_still_load(tmp_path: Path) -> None:
    text = """\
name: anchors
model: &judge {provider: scripted, name: s, temperature: 0}
instructions: hi
evaluations:
  model: *judge
  metrics:
  - &numeric {metric: numeric, threshold: 1, absolute_tolerance: 0.01}
test_cases:
- name: a
  turns:
  - &first
    input: What is six times seven?
    ground_truth: "42"
    evaluations: [*numeric]
  - <<: *first
    input: And 84 / 2?
    ground_truth: "42.0"
"""
    path = make_agent_dir(tmp_path, text)

    agent = load_agent(path, environ={})

    assert agent.config.evaluations is not None
    assert agent.config.evaluations.model == agent.config.model
    first, second = agent.config.test_cases[0].as_turns()
    assert (first.input, first.ground_truth) == ("What is six times seven?", "42")
    assert (second.input, second.ground_truth) == ("And 84 / 2?", "42.0")
    assert second.evaluations == first.evaluations == agent.config.evaluations.metrics


# --- duplicate keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "payload", "where"),
    [
        (
            "suite.yaml",
            "- name: a\n  input: x\n  ground_truth: '1'\n  ground_truth: '2'\n",
            ("suite.yaml", "a", None, "ground_truth", "at line 4 (first at line 3)"),
        ),
        (
            "suite.yaml",
            "test_cases:\n- input: x\n- turns:\n  - input: y\n    turn_config: {k: 1, k: 2}\n",
            ("suite.yaml", "#1", 0, "turns[0].turn_config.k", "at line 5 (first at line 5)"),
        ),
        (
            "suite.yaml",
            "test_cases:\n- input: x\ntest_cases:\n- input: y\n",
            ("suite.yaml", None, None, "test_cases", "at line 3 (first at line 1)"),
        ),
        (
            "suite.json",
            '[{"name": "a", "input": "x", "input": "y"}]',
            ("suite.json", None, None, "", "in a JSON object"),
        ),
    ],
    ids=["in a case", "in a turn's turn_config", "test_cases twice", "in a JSON file"],
)
def test_a_duplicate_key_in_a_test_cases_file_is_reported_with_its_line(
    tmp_path: Path, name: str, payload: str, where: tuple[Any, ...]
) -> None:
    [problem] = problems_of(cases_file_agent(tmp_path, name, payload))
    *place, message = where
    assert (problem.file, problem.test_case, problem.turn, problem.field_path) == tuple(place)
    assert problem.message.startswith("duplicate key ")
    assert message in problem.message


def test_every_duplicate_key_is_reported_once_in_line_order(tmp_path: Path) -> None:
    text = (
        "name: a\nname: b\nmodel: &m {provider: scripted, name: s, name: t}\n"
        "instructions: hi\nevaluations: {model: *m, metrics: [{metric: bleu}]}\n"
    )
    problems = problems_of(make_agent_dir(tmp_path, text))
    assert [str(p) for p in problems] == [
        "agent.yaml: name: duplicate key 'name' at line 2 (first at line 1)",
        "agent.yaml: model.name: duplicate key 'name' at line 3 (first at line 3)",
    ]


def test_a_merge_key_overridden_by_an_explicit_key_is_not_a_duplicate(tmp_path: Path) -> None:
    text = HEAD.replace("  - input: hi\n", "  - &t {input: hi, ground_truth: '1'}\n")
    text += "  - {<<: *t, ground_truth: '2'}\n"
    turns = load_agent(make_agent_dir(tmp_path, text), environ={}).config.test_cases[0].turns
    assert [(t.input, t.ground_truth) for t in turns or []] == [("hi", "1"), ("hi", "2")]


# --- duplicate test case names -----------------------------------------------------------------


def test_duplicate_names_in_a_test_cases_file_name_both_indices(tmp_path: Path) -> None:
    cases = [{"name": "a", "input": "x"}, {"input": "y"}, {"input": "z"}]
    cases.append({"name": "a", "input": "w"})
    problems = problems_of(cases_file_agent(tmp_path, "suite.yaml", yaml.safe_dump(cases)))
    assert [str(p) for p in problems] == [
        "suite.yaml: test case 'a': name: duplicate test case name 'a' (test cases #0 and #3); "
        "give each case its own name"
    ]


def test_unnamed_cases_are_never_duplicates(tmp_path: Path) -> None:
    agent = base_agent()
    agent["test_cases"] = [{"input": "x"}, {"input": "x"}]
    assert len(load_agent(make_agent_dir(tmp_path, agent), environ={}).config.test_cases) == 2


# --- the bounds accept their edges -------------------------------------------------------------


def test_every_bound_accepts_its_edge_values(tmp_path: Path) -> None:
    agent = base_agent()
    agent["execution"] = {
        "llm_timeout": 86400,
        "file_timeout": 0.001,
        "download_timeout": 86400.0,
        "parallel_test_cases": 1024,
    }
    agent["model"].update(temperature=2, top_p=0, max_tokens=1_000_000, latency_ms=600_000)
    agent["claude"] = {"max_turns": 1000, "max_thinking_tokens": 1}
    turn = agent["test_cases"][0]["turns"][2]
    turn["expected_tools"] = [{"name": "subtract", "count": 1000}]
    turn["evaluations"] = [
        {"metric": "numeric", "threshold": 0, "absolute_tolerance": 0, "timeout_ms": 86_400_000},
        {"metric": "bleu", "threshold": 1, "retry_on_failure": 3},
        {"type": "geval", "name": "tone", "criteria": "c", "threshold": 0.5, "scale": 100},
    ]
    loaded = load_agent(make_agent_dir(tmp_path, agent), environ={})
    assert loaded.parallel_test_cases == 1024
    assert loaded.config.execution.llm_timeout == 86400


def test_parallel_bounds_apply_to_the_command_line_and_the_environment(tmp_path: Path) -> None:
    path = make_agent_dir(tmp_path)
    assert load_agent(path, environ={}, parallel_override=1024).parallel_test_cases == 1024
    env = {"HOLODECK_PARALLEL_TEST_CASES": "1024"}
    assert load_agent(path, environ=env).parallel_test_cases == 1024
    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ={}, parallel_override=10**21)
    assert [str(p) for p in caught.value.problems] == [
        "command line: parallel_test_cases: must be <= 1024, got 1000000000000000000000"
    ]

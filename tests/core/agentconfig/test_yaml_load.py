"""The one-pass YAML loader builds what PyYAML's safe loader builds, keeps the alias budget, and
leaves what it does not build itself (duplicate keys among them) to the general way, which gives
the same data and the same errors."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig import yaml_load
from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.limits import MAX_YAML_ALIASES
from runs.core.agentconfig.loader import load_agent
from runs.core.agentconfig.yaml_load import SAFE_LOADER, parse_yaml
from tests.core.agentconfig.agent_dirs import base_agent, make_agent_dir

ONE_PASS = {
    "scalars": """\
ints: [0, 7, -3, +4, 0x1F, 0o17, 017, 0b101, 1_000, 190:20:30]
floats: [1.5, -0.25, 6.8523015e+5, .inf, -.Inf, 1_0.5, 190:20:30.15]
bools: [yes, No, on, OFF, true, False, y, n]
nulls: [~, null, Null, ""]
empty:
strings: ['quoted', "double \\"quoted\\"", plain text, '1', "true", 1.2.3, 0x, -]
dates: [2002-12-14, 2001-12-14t21:59:43.10-05:00, 2001-12-14 21:59:43.10]
blocks:
  literal: |
    two
    lines
  folded: >
    one
    line
  non-specific: ! 12
""",
    "flow and block collections": """\
- {a: 1, b: [x, y, {c: d}], 'e f': null}
- [[], {}, [[]], {k: []}]
- name: case
  turns:
  - input: hi
    expected_tools: [lookup, {name: divide, args: {a: {regex: "25587(\\\\.0+)?"}}}]
""",
    "keys of every scalar kind": "1: int\n1.5: float\nfalse: bool\n~: null\n2001-01-01: date\n",
    "anchors, aliases and merges": """\
base: &base {a: 1, b: 2}
other: &other {b: 20, c: 30}
one: {<<: *base, c: 3}
override: {<<: *base, a: 10, long_key: 1}
inline: {<<: {x: 1}, y: 2}
items: &items [1, 2, {k: v}]
again: [*items, *items, *base]
scalar: &s text
copy: *s
""",
    "a top-level list": "- 1\n- two\n",
    "a top-level scalar": "just text\n",
    "an empty document": "# nothing but a comment\n",
    "an explicit empty document": "---\n...\n",
    "unicode": "name: café ☕\n'ключ': \"значение\\u2603\"\n",
}


def test_the_one_pass_builds_what_the_safe_loader_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    def general_way(text: str) -> Any:
        raise AssertionError("the one pass fell back to the general way")

    monkeypatch.setattr(yaml_load, "_parse_nodes", general_way)
    for name, text in ONE_PASS.items():
        data, duplicates = parse_yaml(text)
        assert duplicates == [], name
        assert data == yaml.load(text, Loader=SAFE_LOADER), name
        assert repr(data) == repr(yaml.load(text, Loader=SAFE_LOADER)), name  # types too


def test_a_merged_mapping_keeps_the_safe_loaders_key_order() -> None:
    text = "a: &a {x: 1, input: 2, y: 3}\nc: {w: 0, <<: *a, y: 9}\n"
    data, _ = parse_yaml(text)
    assert list(data["c"].items()) == list(yaml.load(text, Loader=SAFE_LOADER)["c"].items())


def test_aliases_share_one_object_as_with_the_safe_loader() -> None:
    data, _ = parse_yaml("a: &x [1]\nb: *x\n")
    assert data["a"] is data["b"]


def test_nan_is_read_as_nan() -> None:
    data, _ = parse_yaml("a: .nan\nb: .NaN\n")
    assert math.isnan(data["a"]) and math.isnan(data["b"])


GENERAL_WAY = {
    "a duplicate key": "a: 1\nb: 2\na: 3\n",
    "duplicate keys in nested mappings": "x: {k: 1, k: 2}\ny:\n- {j: 1, j: 1}\nx: 0\n",
    "equal keys of two kinds": "1: a\ntrue: b\n",
    "explicit tags": "a: !!str 12\nb: !!float '3'\nc: !!binary aGk=\nd: !!set {x, y}\n",
    "an ordered map": "a: !!omap [{x: 1}, {y: 2}]\n",
    "an unknown tag": "a: !thing 1\n",
    "a bad timestamp": "a: 2001-13-45\n",
    "a complex key": "? [a, b]\n: c\n",
    "an aliased key": "a: &k key\n*k : value\n",
    "an undefined alias": "a: *nowhere\n",
    "a duplicate anchor": "a: &x 1\nb: &x 2\nc: *x\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "a merge of a list": "a: &a {x: 1, input: 2}\nb: &b {x: 3, input: 4}\nc: {<<: [*a, *b]}\n",
    "two merges": "a: &a {x: 1, input: 2}\nb: &b {x: 3, input: 4}\nc: {<<: *a, <<: *b}\n",
    "a merge of a merge": "a: &a {x: 1}\nb: &b {<<: *a, x: 2}\nc: {<<: *b}\n",
    "a merge of a scalar": "a: {<<: text}\n",
    "a merge of a list of scalars": "a: &a [1]\nb: {<<: *a}\n",
    "a merge key as a value": "a: <<\n",
    "an anchored merge key": "a: {&m <<: {x: 1}}\nb: *m\n",
    "the value key": "=: 1\n",
    "an alias bomb after an undefined alias": "a: *u\nb: &b [1, 2]\n"
    + "".join(f"c{i}: *b\n" for i in range(MAX_YAML_ALIASES + 1)),
    "a syntax error after a duplicate anchor": "a: &x 1\nb: &x 2\nc: [\n",
}


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "data", parse(text)
    except Exception as exc:  # the general way may raise more than YAMLError (a bad date)
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", GENERAL_WAY.values(), ids=GENERAL_WAY.keys())
def test_what_the_one_pass_does_not_build_gives_what_the_general_way_gives(text: str) -> None:
    assert _outcome(parse_yaml, text) == _outcome(yaml_load._parse_nodes, text)


def test_duplicate_keys_are_found_with_their_lines_and_paths() -> None:
    _, duplicates = parse_yaml(GENERAL_WAY["duplicate keys in nested mappings"])
    assert duplicates == [(("x",), "k", 1, 1), (("y", 0), "j", 3, 3), ((), "x", 4, 1)]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]\n" for n in range(6)
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOMB, "aliases expand to too many nodes (more than 10000)"),
        (
            "x: &x 1\n" + "".join(f"k{i}: *x\n" for i in range(MAX_YAML_ALIASES + 1)),
            f"too many aliases (more than {MAX_YAML_ALIASES})",
        ),
        ("a: &c {me: *c}\n", "alias *c refers to a node that contains it"),
        ("a: &c [1, [2, *c]]\n", "alias *c refers to a node that contains it"),
    ],
    ids=["a billion laughs", "too many aliases", "a recursive alias", "a nested recursive alias"],
)
def test_the_one_pass_keeps_the_alias_budget_with_the_line_of_the_alias(
    text: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    general = _outcome(yaml_load._parse_nodes, text)
    monkeypatch.setattr(yaml_load, "_parse_nodes", lambda text: pytest.fail("fell back"))
    with pytest.raises(yaml.MarkedYAMLError) as caught:
        parse_yaml(text)
    assert caught.value.problem == message
    assert ("MarkedYAMLError", str(caught.value)) == general


# --- a big config loads as before ----------------------------------------------------------------


def big_agent(cases: int, *, broken: bool = False) -> dict[str, Any]:
    """``cases`` multi-turn cases with ground truth, matchers and metrics (and, ``broken``, a
    few mistakes of each kind the loader reports)."""
    agent = base_agent()
    numeric = {"type": "standard", "metric": "numeric", "absolute_tolerance": 0.01}
    generated: list[dict[str, Any]] = []
    for n in range(cases):
        turn: dict[str, Any] = {
            "input": f"What was the change in year {2000 + n % 20}?",
            "ground_truth": str(n * 1.5),
            "expected_tools": [
                {"name": "subtract", "args": {"a": {"fuzzy": f"{n},000"}, "b": n}},
                {"name": "divide", "args": {"a": {"regex": rf"{n}(\.0+)?"}}},
            ],
            "turn_config": {"turn_program": f"subtract({n}, 1)"},
        }
        if n % 7 == 0:
            turn["evaluations"] = [dict(numeric)]
        generated.append({"name": f"case {n}", "turns": [turn, {"input": "and then?"}]})
    if broken:
        generated[3]["turns"][0]["ground_truth"] = "  "
        generated[5]["name"] = "case 4"
        generated[8]["turns"][1]["expected_tools"] = [{"name": "divide", "args": {"a.b": 1}}]
        generated[9]["input"] = "both shapes"
    agent["test_cases"] = generated
    return agent


def _general_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runs.core.agentconfig.loader.parse_yaml", yaml_load._parse_nodes)


def test_a_big_config_loads_as_the_general_way_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_agent_dir(tmp_path, big_agent(2_000))
    fast = load_agent(path, environ={})
    _general_way(monkeypatch)
    general = load_agent(path, environ={})

    assert len(fast.config.test_cases) == 2_000
    # (Not the models themselves: a regex matcher holds its compiled pattern, an object.)
    assert fast.config.model_dump() == general.config.model_dump()
    assert fast.redacted_snapshot() == general.redacted_snapshot()
    assert (fast.sources, fast.warnings, fast.raw_yaml) == (
        general.sources,
        general.warnings,
        general.raw_yaml,
    )


def test_a_big_config_with_mistakes_reports_what_the_general_way_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_agent_dir(tmp_path, big_agent(500, broken=True))
    with pytest.raises(ConfigError) as fast:
        load_agent(path, environ={})
    _general_way(monkeypatch)
    with pytest.raises(ConfigError) as general:
        load_agent(path, environ={})

    assert fast.value.lines() == general.value.lines()
    assert len(fast.value.lines()) == 4


def test_a_duplicate_key_deep_in_a_big_config_is_reported_with_its_case_and_line(
    tmp_path: Path,
) -> None:
    text = yaml.safe_dump(big_agent(300), sort_keys=False)
    marker = "  - input: and then?\n"
    at = text.index(marker, len(text) // 2)
    text = text[:at] + marker + "    input: again?\n" + text[at + len(marker) :]
    line = text[:at].count("\n") + 2

    with pytest.raises(ConfigError) as caught:
        load_agent(make_agent_dir(tmp_path, text), environ={})

    [problem] = caught.value.problems
    assert problem.test_case is not None and problem.test_case.startswith("case ")
    assert (problem.turn, problem.field_path) == (1, "turns[1].input")
    assert problem.message == f"duplicate key 'input' at line {line} (first at line {line - 1})"

"""Load an agent.yaml into a validated ``LoadedAgent``, or raise one ``ConfigError`` with all
problems.

Order of work: read the file, substitute ``${VAR}`` from the environment, parse YAML, gather the
raw test cases (inline or from ``test_cases_file``), then validate the agent's own fields and each
test case separately, so one broken case does not hide the problems of the others.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from runs.core.agentconfig.agent import AgentConfig
from runs.core.agentconfig.common import join_path
from runs.core.agentconfig.compat import compat_warnings
from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.limits import MAX_PARALLEL_TEST_CASES, MAX_TIMEOUT_S, range_problem
from runs.core.agentconfig.problems import problems_from_validation
from runs.core.agentconfig.resolve import DEFAULT_IMPORT_TIMEOUT, CodeResolver
from runs.core.agentconfig.test_cases import TestCase, case_shape_problem
from runs.core.agentconfig.tool_config import duplicate_tool_names
from runs.core.agentconfig.yaml_load import parse_yaml

PARALLEL_ENV = "HOLODECK_PARALLEL_TEST_CASES"
GRADER_IMPORT_TIMEOUT_ENV = "HOLODECK_GRADER_IMPORT_TIMEOUT"
SECRET_KEY_RE = re.compile(
    r"(api[_-]?key|secret|password|passwd|authorization|credential|(^|[_-])token$|(^|[_-])key$)",
    re.IGNORECASE,
)
_VAR_RE = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class LoadedAgent:
    """A validated agent: the config, its resolved instructions and where it came from."""

    path: Path
    base_dir: Path
    config: AgentConfig
    instructions: str
    raw_yaml: str
    parallel_test_cases: int
    # Every file the load read besides agent.yaml (test cases, instructions, transcript, tool
    # and grader modules, turn files) -> sha256: with ``raw_yaml`` the content snapshot a
    # dashboard run is pinned to (``sources_changed`` tells what moved since).
    sources: dict[str, str] = field(default_factory=dict)
    # HoloDeck agent.yaml fields accepted without effect here (and HoloDeck values run
    # differently), one line each with its path: shown by validate_agent and the launch form.
    warnings: list[str] = field(default_factory=list)
    # Where the instructions came from when it is neither agent.yaml nor its instructions file
    # (a replay's edited prompt): what a transcript's system prompt says it came from.
    instructions_source: str | None = None

    def redacted_snapshot(self) -> dict[str, Any]:
        """The config as JSON-safe data, with api keys, tokens and secrets replaced by ``***``."""
        data = self.config.model_dump(mode="json", exclude_none=True)
        # Test cases hold no secrets, and a tool arg may well be called "key".
        return {k: v if k == "test_cases" else _redact(v, k) for k, v in data.items()}


def load_agent(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    parallel_override: int | None = None,
    text: str | None = None,
) -> LoadedAgent:
    """Load and validate ``path`` (an agent.yaml, or a directory holding one).

    ``environ`` replaces ``os.environ`` for ``${VAR}`` and ``HOLODECK_PARALLEL_TEST_CASES``;
    ``parallel_override`` is the command-line value, which wins over everything else; ``text``
    is the agent.yaml's content as it was when a run was launched (the file is not read then).
    """
    with collector_paused():
        return _load(path, environ, parallel_override, text)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: the data and models of a big agent.yaml (a million
    objects, no cycle among them) would make the collector walk them again and again, a quarter
    of a load's time (and of a launch's, which holds them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(
    path: str | Path,
    environ: Mapping[str, str] | None,
    parallel_override: int | None,
    text: str | None,
) -> LoadedAgent:
    env = os.environ if environ is None else environ
    agent_path = Path(path)
    if agent_path.is_dir():
        agent_path = agent_path / "agent.yaml"
    label = agent_path.name
    if text is None:
        raw_yaml, data = _read_yaml(agent_path, label, env)
    else:
        raw_yaml, data = text, _parse_text(text, label, env, json_only=False)
    if not isinstance(data, dict):
        raise ConfigError(
            [_problem(label, "", f"must be a mapping of agent fields, got {_kind(data)}")]
        )
    base_dir = agent_path.resolve().parent
    problems: list[ConfigProblem] = []
    resolver = CodeResolver(base_dir, import_timeout=_import_timeout(env, problems))
    context = {"base_dir": base_dir, "resolver": resolver}

    raw_cases, cases_label = _raw_test_cases(data, base_dir, label, env, problems)
    agent = _validate_agent(data, label, context, problems)
    cases = _validate_cases(raw_cases, cases_label, context, problems)
    parallel = _resolve_parallel(parallel_override, data, env, label, problems)
    if problems:
        raise ConfigError(_dedupe(problems))
    assert agent is not None and parallel is not None
    config = agent.model_copy(update={"test_cases": cases})
    return LoadedAgent(
        path=agent_path.resolve(),
        base_dir=base_dir,
        config=config,
        instructions=config.instructions.text,
        raw_yaml=raw_yaml,
        parallel_test_cases=parallel,
        sources=source_hashes(base_dir, _source_paths(config, data, base_dir, context)),
        warnings=holodeck_warnings(config, cases_label=cases_label, agent_label=label),
    )


def holodeck_warnings(config: AgentConfig, *, cases_label: str, agent_label: str) -> list[str]:
    """One line per HoloDeck field that has no effect here, with its path (a test case's
    fields under ``test_cases[i]``, after the test cases file's name when they come from one)."""
    warnings = compat_warnings(config, skip=frozenset({"test_cases"}))
    prefix = "" if cases_label == agent_label else f"{cases_label}: "
    for index, case in enumerate(config.test_cases):
        warnings += [prefix + line for line in compat_warnings(case, f"test_cases[{index}]")]
    return warnings


# --- the content snapshot ----------------------------------------------------------------------


def _source_paths(
    config: AgentConfig, data: dict[str, Any], base_dir: Path, context: dict[str, Any]
) -> list[Path]:
    """The files a load read besides agent.yaml itself."""
    named = [
        data.get("test_cases_file") if isinstance(data.get("test_cases_file"), str) else None,
        config.instructions.file,
        config.model.transcript,
        *(tool.env_file for tool in config.tools if tool.type == "mcp"),
        *(
            file.path
            for case in config.test_cases
            for turn in case.as_turns()
            for file in turn.files or []
            if file.path
        ),
    ]
    paths = [_under(base_dir, name) for name in named if name]
    resolver: CodeResolver = context["resolver"]
    return paths + resolver.module_files()


def _under(base_dir: Path, name: str) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else base_dir / path


def source_hashes(base_dir: Path, paths: Iterable[Path]) -> dict[str, str]:
    """``{path: sha256}``; a path under ``base_dir`` is relative to it, others absolute."""
    hashes: dict[str, str] = {}
    for path in paths:
        key = _source_key(base_dir, path)
        if key not in hashes:
            hashes[key] = _file_hash(_under(base_dir, key))
    return dict(sorted(hashes.items()))


def sources_changed(base_dir: Path, sources: Mapping[str, str]) -> list[str]:
    """The files of a snapshot whose content differs now (or that are gone)."""
    return [key for key, digest in sources.items() if _file_hash(_under(base_dir, key)) != digest]


def _source_key(base_dir: Path, path: Path) -> str:
    resolved = path.resolve()
    try:
        return resolved.relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def _file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


# --- reading ---------------------------------------------------------------------------------


def _read_yaml(path: Path, label: str, env: Mapping[str, str]) -> tuple[str, Any]:
    """(original text, parsed data); ConfigError for a missing file, unset vars, bad YAML."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([_problem(label, "", f"file not found: {path}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([_problem(label, "", f"cannot read {path}: {exc}")]) from None
    return raw, _parse_text(raw, label, env, json_only=path.suffix == ".json")


def _parse_text(raw: str, label: str, env: Mapping[str, str], *, json_only: bool) -> Any:
    text, problems = substitute_env(raw, env, label)
    if problems:
        raise ConfigError(problems)
    return _parse(text, label, json_only=json_only)


def substitute_env(
    text: str, environ: Mapping[str, str], file: str
) -> tuple[str, list[ConfigProblem]]:
    """Replace ``${NAME}`` with the environment's value; one problem per unset variable.

    Comment lines are left alone, so a commented-out ``${OLD_KEY}`` is not an error.
    """
    problems: list[ConfigProblem] = []
    if "${" not in text:
        return text, problems
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if "${" not in line or line.lstrip().startswith("#"):
            continue

        def replace(match: re.Match[str], number: int = index + 1) -> str:
            name = match.group(1)
            if not _VAR_NAME_RE.match(name):
                problems.append(
                    _problem(file, "", f"line {number}: unsupported '${{{name}}}': only ${{NAME}}")
                )
            elif name in environ:
                return environ[name]
            else:
                problems.append(
                    _problem(file, "", f"line {number}: environment variable {name} is not set")
                )
            return match.group(0)

        lines[index] = _VAR_RE.sub(replace, line)
    return "".join(lines), problems


def _parse(text: str, label: str, *, json_only: bool) -> Any:
    if json_only:
        return _parse_json(text, label)
    try:
        data, duplicates = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError([_problem(label, "", _yaml_error(exc))]) from None
    if duplicates:
        raise ConfigError(_duplicate_key_problem(label, data, *found) for found in duplicates)
    return data


def _parse_json(text: str, label: str) -> Any:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                duplicates.append(key)
            result[key] = value
        return result

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        where = f"invalid JSON at line {exc.lineno}, column {exc.colno}"
        raise ConfigError([_problem(label, "", f"{where}: {exc.msg}")]) from None
    if duplicates:
        raise ConfigError(
            _problem(label, "", f"duplicate key {key!r} in a JSON object")
            for key in dict.fromkeys(duplicates)
        )
    return data


def _duplicate_key_problem(
    label: str, data: Any, path: tuple[str | int, ...], key: Any, line: int, first: int
) -> ConfigProblem:
    """The problem of a duplicate key, placed in its test case and turn when it is in one."""
    test_case: str | None = None
    turn: int | None = None
    # A case is test_cases[i] of agent.yaml (or of a test cases file's mapping), or [i] of a
    # test cases file's list; the field path is then relative to the case.
    cases, rest = (data, path) if isinstance(data, list) else (None, path)
    if path[:1] == ("test_cases",) and isinstance(data, dict):
        cases, rest = data.get("test_cases"), path[1:]
    if isinstance(cases, list) and rest and isinstance(rest[0], int) and rest[0] < len(cases):
        index, path = rest[0], rest[1:]
        name = cases[index].get("name") if isinstance(cases[index], dict) else None
        test_case = name if isinstance(name, str) and name.strip() else f"#{index}"
        if len(path) > 1 and path[0] == "turns" and isinstance(path[1], int):
            turn = path[1]
    field_path = ""
    for part in (*path, str(key)):
        field_path = join_path(field_path, f"[{part}]" if isinstance(part, int) else part)
    message = f"duplicate key {str(key)!r} at line {line} (first at line {first})"
    return ConfigProblem(label, test_case, turn, field_path, message)


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    cause = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f"invalid YAML: {cause}"
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {cause}"


def _raw_test_cases(
    data: dict[str, Any],
    base_dir: Path,
    label: str,
    env: Mapping[str, str],
    problems: list[ConfigProblem],
) -> tuple[list[Any], str]:
    """The unvalidated test cases and the label of the file they came from."""
    inline = data.get("test_cases")
    file = data.get("test_cases_file")
    if inline is not None and file is not None:
        problems.append(
            _problem(
                label, "test_cases_file", "give either test_cases or test_cases_file, not both"
            )
        )
        return [], label
    if file is None:
        if inline is None:
            return [], label
        if not isinstance(inline, list):
            problems.append(_problem(label, "test_cases", f"must be a list, got {_kind(inline)}"))
            return [], label
        return inline, label
    if not isinstance(file, str) or not file.strip():
        problems.append(_problem(label, "test_cases_file", "must be a file path"))
        return [], label
    return _read_cases_file(base_dir, file, env, problems)


def _read_cases_file(
    base_dir: Path, file: str, env: Mapping[str, str], problems: list[ConfigProblem]
) -> tuple[list[Any], str]:
    path = Path(file).expanduser()
    path = path if path.is_absolute() else base_dir / path
    try:
        _, payload = _read_yaml(path, file, env)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return [], file
    if isinstance(payload, dict) and "test_cases" in payload:
        extra = sorted(str(k) for k in payload if k != "test_cases")
        if extra:
            problems.append(
                _problem(file, "", f"unknown key(s) {', '.join(extra)}: only 'test_cases' is read")
            )
        payload = payload["test_cases"]
    if not isinstance(payload, list):
        problems.append(
            _problem(
                file,
                "",
                "must be a list of test cases or a mapping with a 'test_cases' list, "
                f"got {_kind(payload)}",
            )
        )
        return [], file
    return payload, file


# --- validating ------------------------------------------------------------------------------


def _validate_agent(
    data: dict[str, Any], label: str, context: dict[str, Any], problems: list[ConfigProblem]
) -> AgentConfig | None:
    agent_data = {k: v for k, v in data.items() if k != "test_cases"}
    tools = agent_data.get("tools")
    if isinstance(tools, list):
        names = [t.get("name") if isinstance(t, dict) else None for t in tools]
        problems.extend(_problem(label, p, m) for p, m in duplicate_tool_names(names))
    try:
        return AgentConfig.model_validate(agent_data, context=context)
    except ValidationError as exc:
        problems.extend(problems_from_validation(exc, file=label, test_case=None))
        return None


def _validate_cases(
    raw_cases: list[Any], label: str, context: dict[str, Any], problems: list[ConfigProblem]
) -> list[TestCase]:
    cases: list[TestCase] = []
    first_index: dict[str, int] = {}
    for index, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            problems.append(
                ConfigProblem(label, f"#{index}", None, "", f"must be a mapping, got {_kind(raw)}")
            )
            continue
        name = raw.get("name")
        case_label = name if isinstance(name, str) and name.strip() else f"#{index}"
        if isinstance(name, str) and name.strip():
            if name in first_index:
                message = (
                    f"duplicate test case name {name!r} (test cases #{first_index[name]} "
                    f"and #{index}); give each case its own name"
                )
                problems.append(ConfigProblem(label, name, None, "name", message))
            else:
                first_index[name] = index
        shape = case_shape_problem({k for k, v in raw.items() if v is not None})
        if shape is not None:
            problems.append(ConfigProblem(label, case_label, None, shape[0], shape[1]))
        try:
            cases.append(TestCase.model_validate(raw, context=context))
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=label, test_case=case_label))
    return cases


def _resolve_parallel(
    override: int | None,
    data: dict[str, Any],
    env: Mapping[str, str],
    label: str,
    problems: list[ConfigProblem],
) -> int | None:
    """CLI > YAML ``execution.parallel_test_cases`` > env > 1 (YAML value checked by the model),
    each from 1 to ``MAX_PARALLEL_TEST_CASES``."""
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, int):
            problem: str | None = f"must be an integer, got {override!r}"
        else:
            problem = _parallel_bound(override)
        if problem is not None:
            problems.append(
                ConfigProblem("command line", None, None, "parallel_test_cases", problem)
            )
            return None
        return override
    execution = data.get("execution")
    if isinstance(execution, dict) and execution.get("parallel_test_cases") is not None:
        value = execution["parallel_test_cases"]
        return value if isinstance(value, int) and not isinstance(value, bool) else 1
    raw = env.get(PARALLEL_ENV)
    if raw is None or not raw.strip():
        return 1
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    problem = _parallel_bound(value)
    if problem is not None:
        bound = problem.partition(", got")[0]
        problems.append(
            ConfigProblem(
                "environment",
                None,
                None,
                PARALLEL_ENV,
                f"must be an integer {bound.removeprefix('must be ')}, got {raw!r}",
            )
        )
        return None
    return value


def _import_timeout(env: Mapping[str, str], problems: list[ConfigProblem]) -> float:
    """Seconds a grader or tool module may take to import (HOLODECK_GRADER_IMPORT_TIMEOUT,
    from the environment like HOLODECK_PARALLEL_TEST_CASES; runs/core/agentconfig/resolve.py)."""
    raw = env.get(GRADER_IMPORT_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_IMPORT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        problem: str | None = f"must be a number of seconds, got {raw[:40]!r}"
    else:
        problem = range_problem(value, "", 0, MAX_TIMEOUT_S, positive=True)
        if problem is None:
            return value
    assert problem is not None
    problems.append(
        ConfigProblem("environment", None, None, GRADER_IMPORT_TIMEOUT_ENV, problem.strip())
    )
    return DEFAULT_IMPORT_TIMEOUT


def _parallel_bound(value: int) -> str | None:
    """``must be >= 1, got 0`` / ``must be <= 1024, got 2000``, or None."""
    problem = range_problem(value, "", 1, MAX_PARALLEL_TEST_CASES)
    return None if problem is None else problem.strip()


# --- helpers ---------------------------------------------------------------------------------


def _problem(file: str, field_path: str, message: str) -> ConfigProblem:
    return ConfigProblem(file, None, None, field_path, message)


def _dedupe(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    """The loader checks some rules on the raw data too; report each problem once."""
    return list(dict.fromkeys(problems))


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if isinstance(value, str) and value and SECRET_KEY_RE.search(key):
        return "***"
    return value

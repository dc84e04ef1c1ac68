"""A what-if replay with an edited system prompt changes a verdict: a real semantic-kernel agent
over a fake OpenAI server whose answer depends on the system prompt, replayed by
``manage.py replay`` while its tool would raise; the compare page of the two runs shows the
prompt lines changed and the turn that changed verdict."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, Run
from runs.services import launch
from runs.services.projects import project_register
from tests.core.backends.fake_llm_servers import FakeOpenAI
from tests.web.snapshot_helpers import verdicts

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "You are a careful calculator."
TERSE = "Answer with the number only."

# The tool works for the original run; with LEDGER_DOWN set it raises, and it logs every call
# to LEDGER_LOG when that is set.
TOOLS = '''
import os


def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    if os.environ.get("LEDGER_LOG"):
        with open(os.environ["LEDGER_LOG"], "a") as log:
            log.write(f"{a} {b}\\n")
    if os.environ.get("LEDGER_DOWN"):
        raise RuntimeError("the ledger is down")
    return a - b
'''

AGENT = """
name: calculator
model:
  provider: openai
  name: gpt-4o-mini
  temperature: 0
  endpoint: {endpoint}
  api_key: test-key-not-secret
instructions:
  inline: "{prompt}"
tools:
  - {{type: function, name: subtract, file: tools.py, function: subtract}}
evaluations:
  metrics:
    - {{type: standard, metric: equality}}
test_cases:
  - name: subtract
    turns:
      - {{input: please subtract 181001 from 206588, ground_truth: "25587"}}
      - {{input: thanks, ground_truth: "You said: thanks"}}
"""


class PromptedOpenAI(FakeOpenAI):
    """Answers a tool result with the number alone when the system prompt asks for it."""

    def reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        message = super().reply(messages, tools)
        system = str(messages[0].get("content")) if messages[0]["role"] == "system" else ""
        if TERSE in system and messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": str(messages[-1]["content"])}
        return message


@pytest.fixture
def fake() -> Iterator[PromptedOpenAI]:
    server = PromptedOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def original(tmp_path: Path, fake: PromptedOpenAI, eager_celery: None) -> Run:
    """A settled run of the calculator: its first turn fails equality ("The difference is
    25587." is not "25587"), its second passes."""
    directory = tmp_path / "calculator"
    directory.mkdir()
    (directory / "tools.py").write_text(TOOLS)
    agent = AGENT.format(endpoint=f"{fake.url}/v1", prompt=PROMPT)
    (directory / "agent.yaml").write_text(agent)
    project: AgentProject = project_register(agent_path=directory / "agent.yaml")
    run = launch.run_create(project=project)
    run.refresh_from_db()
    assert verdicts(run) == [("subtract", "failed", ["failed", "passed"])]
    return run


def replay(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("replay", *args, stdout=out, stderr=err)
    return int(exit_.value.code or 0), out.getvalue(), err.getvalue()


def test_an_edited_prompt_replayed_from_the_command_line_fixes_a_turn_while_the_tool_is_down(
    original: Run, staff_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ledger.log"
    monkeypatch.setenv("LEDGER_DOWN", "1")
    monkeypatch.setenv("LEDGER_LOG", str(log))

    code, out, err = replay(str(original.pk), "--prompt-text", f"{PROMPT}\n{TERSE}")

    assert code == 0, err  # every case passed
    replayed = Run.objects.get(rerun_of=original)
    assert f"replay of run {original.pk}: run {replayed.pk}" in out
    assert "system prompt edited (+1 −0 lines), tools: recorded-only" in out
    assert "case 0 subtract: failed -> passed" in out and "turn 1: failed -> passed" in out
    assert "turn 2" not in out  # its verdict did not change
    assert verdicts(replayed) == [("subtract", "passed", ["passed", "passed"])]
    assert not log.exists()  # the recording answered: the tool that would raise never ran

    runs = f"{original.pk},{replayed.pk}"
    fixed = staff_client.get(reverse("compare"), {"runs": runs, "show": "fixes"})
    assert [view.row.key for view in fixed.context["rows"]] == ["subtract"]
    config = staff_client.get(reverse("compare_config"), {"runs": runs})
    lines = [(line.kind, line.text) for line in config.context["prompt_diff"]]
    assert ("add", f"+{TERSE}") in lines and ("del", f"-{PROMPT}") not in lines


def test_live_tools_run_and_fail_where_the_recording_would_have_answered(
    original: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ledger.log"
    monkeypatch.setenv("LEDGER_DOWN", "1")
    monkeypatch.setenv("LEDGER_LOG", str(log))

    code, out, _ = replay(str(original.pk), "--case", "0", "--tools", "live")

    assert code == 1  # a case failed
    assert len(log.read_text().splitlines()) == 1  # the tool ran, and raised
    assert "no verdict changed" in out


def test_the_command_refuses_bad_input_with_exit_code_2(original: Run) -> None:
    assert replay("999999")[0] == 2
    code, _, err = replay(str(original.pk), "--param", "warmth=3")
    assert code == 2 and "--param takes KEY=VALUE" in err
    code, _, err = replay(str(original.pk), "--case", "5")
    assert code == 2 and "no case of index 5" in err
    assert not Run.objects.filter(rerun_of=original).exists()

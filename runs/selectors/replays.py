"""What-if replays (``runs.services.replay``): the recording a replay's tools answer from, what
a replay's page says it changed, what its form is prefilled with, the system prompt a run ran,
and the verdicts a replay changed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from runs.core.runoptions.replay import POLICY_TEXTS, ReplayPick
from runs.models import CaseRow, Run, TurnRow
from runs.selectors.cases import CaseFilters, case_rows
from runs.selectors.reruns import failed_case_indices
from runs.selectors.review_panels import cases_by_review
from runs.selectors.snapshots import snapshot_contents, stored_snapshot

# The files of an agent a replay's form offers as its system prompt.
PROMPT_SUFFIXES = frozenset({".md", ".txt", ".prompt", ".j2", ".jinja", ".jinja2"})
MAX_PROMPT_FILES = 200
# The form lists this many of the original's cases to choose from (more: their indices typed).
MAX_CASES_LISTED = 300
# A replay of the cases a filtered case list shows takes at most this many.
MAX_CASES_CHOSEN = 1000

RecordedTurns = list[list[dict[str, Any]]]


def replay_recording(*, original_id: int, indices: list[int]) -> dict[int, RecordedTurns]:
    """The original's recorded tool calls of each case of ``indices`` (its first repetition),
    turn by turn: {case index: [[call, ...] per turn]} (1 query)."""
    rows = (
        TurnRow.objects.filter(run_id=original_id, case__index__in=indices, case__repetition=0)
        .order_by("case__index", "index")
        .values_list("case__index", "index", "tool_invocations")
    )
    recorded: dict[int, RecordedTurns] = {}
    for case_index, turn_index, calls in rows:
        turns = recorded.setdefault(case_index, [])
        turns.extend([] for _ in range(turn_index + 1 - len(turns)))
        turns[turn_index] = [dict(call) for call in calls or [] if isinstance(call, dict)]
    return recorded


@dataclass(frozen=True)
class ReplayLine:
    """What a replay's page says of it (``runs/_replay.html``)."""

    of: int
    changes: list[str]
    policy: str
    policy_text: str
    cases: str  # "failed cases", "3 cases"

    @property
    def summary(self) -> str:
        return ", ".join([*(self.changes or ["no change"]), f"tools: {self.policy}"])


def run_replay_line(*, run: Run) -> ReplayLine | None:
    """What the run replayed and changed; None for a run that is no replay (no query)."""
    pick = run.run_options.replay
    if pick is None:
        return None
    count = len(run.run_options.cases)
    cases = "failed cases" if pick.cases else f"{count} case{'s' if count != 1 else ''}"
    return ReplayLine(
        of=pick.of,
        changes=pick.changes(),
        policy=pick.policy,
        policy_text=POLICY_TEXTS[pick.policy],
        cases=cases,
    )


def run_prompt_text(run: Run) -> str | None:
    """The system prompt ``run`` ran: a replay's own, its config's inline text, else the
    instructions file read from its snapshot; None when unknown (a file, no snapshot)."""
    pick = run.run_options.replay
    if pick is not None and pick.prompt is not None:
        return pick.prompt
    instructions = (run.config_snapshot or {}).get("instructions") or {}
    if isinstance(instructions.get("inline"), str):
        return str(instructions["inline"])
    name = instructions.get("file")
    if not isinstance(name, str) or run.snapshot is None:
        return None
    snapshot = stored_snapshot(run.snapshot)
    base = PurePosixPath(run.run_options.agent_file or "agent.yaml").parent
    entry = snapshot.file(str(base / name) if str(base) != "." else name)
    if entry is None:
        return None
    data = snapshot_contents(wanted={snapshot.id: [entry]}).get((snapshot.id, entry.path))
    return data.decode("utf-8", errors="replace") if data is not None else None


@dataclass(frozen=True)
class CaseChoice:
    index: int
    name: str
    outcome: str
    chosen: bool


@dataclass(frozen=True)
class ReplayFormData:
    """What a run's replay form shows: the prompt to edit, the agent's prompt files, its model,
    its cases (the chosen ones checked)."""

    prompt: str
    prompt_files: list[str]
    provider: str
    model: str
    params: dict[str, Any]
    cases: list[CaseChoice]
    more_cases: int  # the run's cases past those listed
    unlisted: list[int]  # chosen cases past those listed (typed in as indices)
    failed: list[int]


def replay_form_data(*, run: Run, chosen: list[int] | None) -> ReplayFormData:
    """The form of a replay of ``run``, ``chosen`` cases checked (None: its failed ones)."""
    failed = failed_case_indices(run=run)
    picked = set(failed if chosen is None else chosen)
    rows = list(
        CaseRow.objects.filter(run=run, repetition=0)
        .order_by("index")
        .values_list("index", "name", "outcome")[:MAX_CASES_LISTED]
    )
    config = run.config_snapshot or {}
    model = config.get("model") or {}
    return ReplayFormData(
        prompt=run_prompt_text(run) or "",
        prompt_files=_prompt_files(run),
        provider=str(model.get("provider", "")),
        model=str(model.get("name", "")),
        params={key: model.get(key) for key in ("temperature", "max_tokens", "top_p")},
        cases=[CaseChoice(i, name, outcome, i in picked) for i, name, outcome in rows],
        more_cases=max(0, run.total_cases // max(run.repeats, 1) - len(rows)),
        unlisted=sorted(picked - {index for index, _, _ in rows}),
        failed=failed,
    )


def _prompt_files(run: Run) -> list[str]:
    """The text files of the run's agent directory (its snapshot) a prompt may be read from,
    relative to its agent.yaml."""
    if run.snapshot is None:
        return []
    base = PurePosixPath(run.run_options.agent_file or "agent.yaml").parent
    files = []
    for entry in stored_snapshot(run.snapshot).files:
        path = PurePosixPath(entry.path)
        if path.suffix.lower() not in PROMPT_SUFFIXES or path.name.lower() == "readme.md":
            continue
        if str(base) != "." and not path.is_relative_to(base):
            continue
        files.append(str(path.relative_to(base)) if str(base) != "." else str(path))
    return files[:MAX_PROMPT_FILES]


@dataclass(frozen=True)
class VerdictChange:
    """A case whose verdict, or a turn's, differs between a run and its replay."""

    index: int
    name: str
    before: str
    after: str
    turns: list[tuple[int, str, str]]  # (turn index, before, after) of each changed turn


def replay_verdict_changes(*, original_id: int, replay_id: int) -> list[VerdictChange]:
    """The replayed cases whose verdict or turn verdicts changed from the original's first
    repetition (2 queries)."""

    def verdicts(run_id: int) -> dict[int, tuple[str, str, dict[int, str]]]:
        rows = TurnRow.objects.filter(run_id=run_id, case__repetition=0).values_list(
            "case__index", "case__name", "case__outcome", "index", "outcome"
        )
        found: dict[int, tuple[str, str, dict[int, str]]] = {}
        for index, name, case_outcome, turn, outcome in rows:
            found.setdefault(index, (name, case_outcome, {}))[2][turn] = outcome
        return found

    after = verdicts(replay_id)
    before = verdicts(original_id)
    changes = []
    for index in sorted(after):
        name, outcome, turns = after[index]
        _, was, turns_before = before.get(index, ("", "", {}))
        changed = [
            (turn, turns_before.get(turn, ""), now)
            for turn, now in sorted(turns.items())
            if turns_before.get(turn, "") != now
        ]
        if changed or was != outcome:
            changes.append(VerdictChange(index, name, was, outcome, changed))
    return changes


@dataclass(frozen=True)
class ReplayNote:
    """What the compare page says of a replay among its runs."""

    run_id: int
    of: int
    summary: str


def replay_notes(runs: list[Run]) -> list[ReplayNote]:
    """The replays among ``runs`` (read without their options): what each changed (no query
    when none is a re-run or replay, else 1)."""
    ids = [run.pk for run in runs if run.rerun_of_id]
    if not ids:
        return []
    rows = Run.objects.filter(pk__in=ids).order_by("pk").values_list("pk", "options")
    notes = []
    for run_id, options in rows:
        pick = (options or {}).get("replay") if isinstance(options, dict) else None
        if pick:
            stored = ReplayPick.model_validate(pick)
            notes.append(ReplayNote(run_id, stored.of, stored.summary()))
    return notes


def filtered_case_indices(*, run: Run, filters: CaseFilters, review: str = "") -> list[int]:
    """The indices of the run's cases its page's case list shows with ``filters`` (and the
    ``review`` filter): the cases a replay of "these cases" takes (at most
    ``MAX_CASES_CHOSEN``; 1 query)."""

    cases = case_rows(run=run, filters=filters, fields=("id", "index"))
    if review:
        cases = cases_by_review(cases, run=run, which=review)
    indices = cases.order_by("index").values_list("index", flat=True).distinct()
    return list(indices[:MAX_CASES_CHOSEN])

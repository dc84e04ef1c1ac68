"""One case in every compared run, turn by turn (the side by side): each run's turn against the
compared run's, its verdict's change, the response as a word diff, the tool calls call by call,
the metrics with their score deltas, and where a searched text occurs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils.safestring import SafeString

from runs.compare.pages.view_models import Column
from runs.compare.reads.comparison import cases_by_key
from runs.core.comparison.matrix import (
    BASELINE_ORDER,
    COMMIT_ORDER,
    FIX,
    REGRESSION,
    Change,
    change_of,
    compared_with,
    older_than_compared,
    verdict,
)
from runs.core.comparison.query import ComparisonQuery
from runs.core.verdicts.kinds import TOOLS_KIND
from runs.core.verdicts.numbers import format_score_delta
from runs.core.verdicts.outcomes import Outcome
from runs.selectors.review_marks import TriageMark, marks_of_turns
from runs.web.diffs import CallPair, tool_call_diff, word_diff

if TYPE_CHECKING:
    from runs.models import CaseRow, MetricRow, Run, TurnRow


# Side by side, the most runs laid out as columns; more are stacked, one under another, each
# turn's tables (arg-match, metrics with their reasoning) at the page's width.
SIDE_BY_SIDE_MOST = 2


@dataclass(frozen=True)
class SideBySide:
    """One case in every compared run: each run's case and turns, the run each is compared
    with, and the runs whose column is one repetition of a repeated case."""

    runs: list[Run]
    baseline: Run
    key: str
    query: ComparisonQuery
    cases: dict[int, CaseRow]
    turns: dict[int, list[TurnRow]]
    against: dict[int, int]
    # A repeated run's column is one repetition: whether the case changed is said over all of
    # them (the compare page's significance), never by one repetition against another.
    repeated: frozenset[int]
    # How people triaged the failing turns (by turn id): its own review, or a known one
    # carried from an earlier run (``runs.selectors.review_marks``).
    triage: dict[int, TriageMark] = field(default_factory=dict)

    @property
    def turn_total(self) -> int:
        return max((len(found) for found in self.turns.values()), default=0)

    def turn(self, index: int) -> TurnAcross:
        return turn_across(
            index,
            self.runs,
            self.cases,
            self.turns,
            self.against,
            self.query.kinds,
            self.query.q,
            self.repeated,
            self.triage,
        )

    def query_state(self) -> dict[str, str]:
        """The side by side's query string, as its links hold it."""
        return {
            "runs": ",".join(str(run.pk) for run in self.runs),
            "baseline": str(self.baseline.pk) if self.baseline.pk != self.runs[0].pk else "",
            "key": self.key,
            "order": self.query.order if self.query.order != BASELINE_ORDER else "",
            "kinds": ",".join(self.query.kinds),
            "q": self.query.q,
        }

    def back_state(self) -> dict[str, str]:
        """The compare page's query string, for the way back to it."""
        state = self.query_state()
        baseline = str(self.baseline.pk) if self.query.order == BASELINE_ORDER else ""
        return {**state, "baseline": baseline, "key": ""}

    def context(self) -> dict[str, Any]:
        runs = self.runs
        return {
            "runs": runs,
            "left": self.baseline,
            "key": self.key,
            "cases": self.cases,
            "columns": [
                Column(run, next((r for r in runs if r.pk == self.against.get(run.pk)), None))
                for run in runs
            ],
            "missing": [run for run in runs if run.pk not in self.cases],
            "repeated": [run for run in runs if run.pk in self.repeated],
            # Two runs side by side; more, one under another: a turn's tables need the width.
            "stacked": len(runs) > SIDE_BY_SIDE_MOST,
            "turn_total": self.turn_total,
            "kinds": self.query.kinds,
            "order": self.query.order,
            "chronological": self.query.order == COMMIT_ORDER,
            "q": self.query.q,
        }


def side_by_side(runs: list[Run], key: str, query: ComparisonQuery) -> SideBySide | None:
    """The case ``key`` in each of ``runs``, each against the baseline (``query.chosen``, one
    of them; by default the first) or, in commit order, the run before it (None: no run has
    it; 3 queries)."""
    cases = {case.run_id: case for case in cases_by_key([run.pk for run in runs], key)}
    if not cases:
        return None
    baseline = next((run for run in runs if run.pk == query.chosen), runs[0])
    turns = {run_id: list(case.turns.all()) for run_id, case in cases.items()}
    project_of = {run.pk: run.project_id for run in runs}
    return SideBySide(
        runs=runs,
        baseline=baseline,
        key=key,
        query=query,
        cases=cases,
        turns=turns,
        against=compared_with([run.pk for run in runs], baseline.pk, query.order),
        repeated=frozenset(
            run_id for run_id, case in cases.items() if getattr(case, "repetition_count", 1) > 1
        ),
        triage=marks_of_turns(
            turns=[turn for found in turns.values() for turn in found], project_of=project_of
        ),
    )


@dataclass(frozen=True)
class MetricCell:
    """One run's result of a metric on a turn, and its score's change against the compared
    run's (None: either has no score)."""

    metric: MetricRow | None
    delta: float | None

    @property
    def delta_text(self) -> str:
        return format_score_delta(self.delta)


@dataclass(frozen=True)
class MetricAcross:
    name: str
    kind: str
    cells: list[MetricCell]  # one per run, in the columns' order

    @property
    def changed(self) -> bool:
        first = self.cells[0].metric
        return any(
            (cell.metric is None) != (first is None)
            or (
                cell.metric is not None
                and first is not None
                and (cell.metric.outcome, cell.metric.score) != (first.outcome, first.score)
            )
            for cell in self.cells
        )


@dataclass(frozen=True)
class RunTurn:
    """One run's column of a turn: the turn (None: the run lacks it), its verdict under the kind
    filter and its change against the compared run's, the response as a word diff and the tool
    calls call by call against it."""

    run: Run
    case: CaseRow | None
    turn: TurnRow | None
    against: Run | None
    verdict: Outcome
    change: Change | None
    response_diff: SafeString | None  # None: the reference, or a side without the turn
    calls: list[CallPair]
    # Where the searched text occurs, input then response.
    excerpts: list[Excerpt]
    triage: TriageMark | None = None  # how people triaged it, when it failed

    @property
    def hit(self) -> bool:
        return bool(self.excerpts)

    @property
    def anchor(self) -> str:
        """The prefix of its turn's anchor (two runs' turns share one page)."""
        return f"run-{self.run.pk}-"

    @property
    def response_changed(self) -> bool:
        diff = self.response_diff
        return diff is not None and ("<ins>" in diff or "<del>" in diff)

    @property
    def calls_changed(self) -> list[CallPair]:
        return [call for call in self.calls if not call.same]


@dataclass(frozen=True)
class TurnAcross:
    """One turn of the case in every compared run."""

    index: int
    columns: list[RunTurn]
    metrics: list[MetricAcross]
    show_tools: bool
    only_link: str = ""  # the query string of the page showing this turn alone

    @property
    def regressed(self) -> list[Run]:
        return [column.run for column in self.columns if column.change == REGRESSION]

    @property
    def fixed(self) -> list[Run]:
        return [column.run for column in self.columns if column.change == FIX]

    @property
    def change(self) -> Change | None:
        """ "regression" if a run regressed on it, else "fix" if one was fixed, else None."""
        return REGRESSION if self.regressed else FIX if self.fixed else None

    @property
    def hit(self) -> bool:
        return any(column.hit for column in self.columns)

    @property
    def changed(self) -> bool:
        """Anything to look at: a verdict, a response, a call, a metric differs."""
        if self.change or any(column.turn is None for column in self.columns):
            return True
        first = self.columns[0].turn
        assert first is not None
        for column in self.columns[1:]:
            turn = column.turn
            assert turn is not None
            if (turn.response, turn.outcome) != (first.response, first.outcome):
                return True
            if column.calls_changed:
                return True
        return any(metric.changed for metric in self.metrics)


def _in_time(
    before: TurnRow | None, turn: TurnRow | None, backwards: bool, kinds: list[str]
) -> tuple[Outcome, Outcome]:
    """The two verdicts of a turn, the older run's first."""
    pair = (_turn_verdict(before, kinds), _turn_verdict(turn, kinds))
    return (pair[1], pair[0]) if backwards else pair


def turn_across(
    index: int,
    runs: list[Run],
    cases: dict[int, CaseRow],
    turns: dict[int, list[TurnRow]],
    against: dict[int, int],
    kinds: list[str],
    q: str,
    repeated: frozenset[int] | set[int] = frozenset(),
    triage: dict[int, TriageMark] | None = None,
) -> TurnAcross:
    """One turn in every run; ``repeated``: the runs whose column is one repetition of the
    case, which is never marked regressed or fixed against another run's."""
    of_run = {
        run.pk: (turns[run.pk][index] if index < len(turns.get(run.pk, [])) else None)
        for run in runs
    }
    by_id = {run.pk: run for run in runs}
    # A run older than the run it is compared with reads forward in time, from it to that run.
    backwards = older_than_compared(against, [run.pk for run in runs])
    columns = []
    for run in runs:
        turn, other = of_run[run.pk], against.get(run.pk)
        before = of_run.get(other) if other is not None else None
        diff, calls = None, []
        if other is not None and turn is not None and before is not None:
            diff = word_diff(before.response, turn.response)
            calls = _calls(before, turn, other, run.pk)
        columns.append(
            RunTurn(
                run=run,
                case=cases.get(run.pk),
                turn=turn,
                against=by_id.get(other) if other is not None else None,
                verdict=_turn_verdict(turn, kinds),
                change=None
                if other is None or {run.pk, other} & repeated
                else change_of(*_in_time(before, turn, run.pk in backwards, kinds)),
                response_diff=diff,
                calls=calls,
                excerpts=_turn_excerpts(turn, q),
                triage=(triage or {}).get(turn.pk) if turn is not None else None,
            )
        )
    return TurnAcross(
        index=index,
        columns=columns,
        metrics=_metrics_across(runs, of_run, against, kinds),
        show_tools=not kinds or TOOLS_KIND in kinds,
    )


def _turn_excerpts(turn: TurnRow | None, q: str) -> list[Excerpt]:
    if turn is None or not q:
        return []
    return excerpts(turn.input, q, "input") + excerpts(turn.response or "", q, "response")


def _calls(before: TurnRow | None, after: TurnRow | None, left: int, right: int) -> list[CallPair]:
    """The two turns' tool calls call by call, the sides named by their runs."""
    pairs = tool_call_diff(
        before.tool_invocations if before else [], after.tool_invocations if after else []
    )
    named = {"only on the left": f"only in #{left}", "only on the right": f"only in #{right}"}
    return [
        CallPair(pair.index, pair.left, pair.right, [named.get(c, c) for c in pair.changes])
        for pair in pairs
    ]


EXCERPT_CHARS = 60  # of context either side of a match
MOST_EXCERPTS = 3  # per text


@dataclass(frozen=True)
class Excerpt:
    """Where a searched text occurs: the match with some context either side (drawn by
    compare_case.html's ``excerpt`` partial, the match marked)."""

    where: str  # in what: "input" or "response"
    before: str
    match: str
    after: str
    cut_before: bool  # the text goes on before it ("…")
    cut_after: bool


def excerpts(text: str, q: str, where: str = "") -> list[Excerpt]:
    """Where ``q`` occurs in ``text`` (case folded): up to a few snippets, each the match with
    some context either side."""
    if not q or not text:
        return []
    folded, needle = text.casefold(), q.casefold()
    if len(folded) != len(text):  # a letter that folds to several: positions would shift
        folded, needle = text.lower(), q.lower()
        if len(folded) != len(text):
            return []
    found: list[Excerpt] = []
    start = 0
    while len(found) < MOST_EXCERPTS and (at := folded.find(needle, start)) != -1:
        end = at + len(needle)
        left, right = max(0, at - EXCERPT_CHARS), min(len(text), end + EXCERPT_CHARS)
        found.append(
            Excerpt(
                where,
                text[left:at],
                text[at:end],
                text[end:right],
                cut_before=left > 0,
                cut_after=right < len(text),
            )
        )
        start = end
    return found


def _turn_verdict(turn: TurnRow | None, kinds: list[str]) -> Outcome:
    if turn is None:
        return Outcome.ABSENT
    return verdict(turn.outcome, turn.kind_outcomes or {}, frozenset(kinds))


def _metrics_across(
    runs: list[Run],
    of_run: dict[int, TurnRow | None],
    against: dict[int, int],
    kinds: list[str],
) -> list[MetricAcross]:
    """Every metric of the turn in any run (in the order the runs have them), with each run's
    result and its score's delta against the compared run's."""
    results: dict[int, dict[str, MetricRow]] = {}
    names: dict[str, str] = {}  # name -> kind, in order of appearance
    for run in runs:
        turn = of_run[run.pk]
        found = {m.metric_name: m for m in turn.metrics.all()} if turn else {}
        results[run.pk] = found
        for name, result in found.items():
            names.setdefault(name, result.kind)
    across = []
    for name, kind in names.items():
        if kinds and kind not in kinds:
            continue
        cells = []
        for run in runs:
            metric = results[run.pk].get(name)
            other = against.get(run.pk)
            before = results[other].get(name) if other is not None else None
            delta = None
            if (
                metric is not None
                and before is not None
                and metric.score is not None
                and before.score is not None
            ):
                delta = metric.score - before.score
            cells.append(MetricCell(metric, delta))
        across.append(MetricAcross(name, kind, cells))
    return across

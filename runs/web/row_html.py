"""The rows of long lists, drawn here rather than in their templates: the run page's case rows
and the home page's projects.

A page holds a hundred or more rows of a dozen values each, and the template engine would spend
most of the page's time on them (resolving variables, reversing URLs row by row). Each row is
the markup its template would draw; every value a user, a run or an agent wrote is escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from runs.core.verdicts.numbers import format_duration, ordinal
from runs.core.verdicts.numbers import format_rate as percent
from runs.core.verdicts.outcomes import BAD, GRADED_VALUES, CaseState, Outcome
from runs.core.verdicts.repeats import merged_outcome, repeat_stats
from runs.shared.marks import (
    ago,
    case_chips,
    mark,
    outcome_label,
    shortsha,
    unpassed_counts,
)

if TYPE_CHECKING:
    from runs.models import AgentProject, CaseRow
    from runs.selectors.cases import Repetition
    from runs.selectors.projects import LastRun

PENDING = CaseState.PENDING  # CaseRow.Status values (the rows read no model)
RUNNING = CaseState.RUNNING
LIVE = frozenset({PENDING, RUNNING})  # not settled yet
FAILED_OUTCOMES = frozenset(outcome.value for outcome in BAD)
# Counted in a repeated case's "k/n reps passed", or no verdict yet: not listed apart.
NOT_OTHER = GRADED_VALUES | {""}
SWAP_OOB = ' hx-swap-oob="true"'
DESCRIPTION_CHARS = 120


# --- the run page's case rows ---------------------------------------------------------------
# The ``case_list`` partial of ``run_detail.html`` shows them, and the progress poll swaps
# them in (``oob``: with ``hx-swap-oob``).


def case_rows_html(
    cases: Iterable[CaseRow], *, run_id: int, oob: bool = False, stopping: bool = False
) -> SafeString:
    """The rows of ``cases`` (of run ``run_id``), one line each; ``stopping``: the run was
    cancelled while they ran (``Run.is_stopping``)."""
    turns_url = _url_of("case_turns", run_id)
    page_url = _url_of("case_detail", run_id)
    swap = SWAP_OOB if oob else ""
    rows = [
        _pending_row(case, swap)
        if case.status == PENDING
        else _case_row(case, swap, turns_url(case.pk), page_url(case.pk), stopping)
        for case in cases
    ]
    return mark_safe("".join(rows))


# A repeated run lists each case once, its repetitions under it (``selectors.case_groups``):
# the row says how many repetitions passed and the case's verdict over them, as compare reads
# it (``runs.core.verdicts.repeats.merged_outcome``); opened, it shows one repetition's turns with
# the switcher between them (case_detail.html's ``repetitions``), which says in the row's header
# which one is shown (``#case-<first>-shown``).


def case_group_rows_html(
    groups: Iterable[Sequence[Repetition]],
    *,
    run_id: int,
    oob: bool = False,
    stopping: bool = False,
) -> SafeString:
    """One row per case of a repeated run, of ``groups`` (each case's repetitions, in order);
    ``oob`` and ``stopping`` as for ``case_rows_html``."""
    turns_url = _url_of("case_turns", run_id)
    page_url = _url_of("case_detail", run_id)
    swap = SWAP_OOB if oob else ""
    rows = [_group_row(group, swap, turns_url, page_url, stopping) for group in groups]
    return mark_safe("".join(rows))


def _group_row(
    reps: Sequence[Repetition],
    swap: str,
    turns_url: Callable[[int], str],
    page_url: Callable[[int], str],
    stopping: bool,
) -> str:
    first = reps[0]
    head = (
        f'<span class="idx">#{ordinal(first.case_index)}</span>'
        f'<span class="name">{escape(first.label)}</span>'
    )
    if all(rep.status == PENDING for rep in reps):
        return (
            f'<div class="case case-pending case-group" id="case-{first.pk}"{swap}>'
            f'<div class="case-sum">{_mark("")}{head}'
            f'<span class="chip chip-muted">{len(reps)} reps</span>'
            f'<span class="chip chip-pending">pending</span></div></div>\n'
        )
    live = sum(1 for rep in reps if rep.status in LIVE)
    verdict = "" if live else merged_outcome([rep.outcome for rep in reps])
    label = escape(first.label)
    return (
        f'<details class="case case-group case-{verdict or RUNNING}"'
        f' id="case-{first.pk}"{swap} hx-get="{turns_url(_shown_first(reps).pk)}"'
        f' hx-trigger="toggle once" hx-target="find .turns">'
        f'<summary class="case-sum">{_mark(verdict)}{head}'
        f"{_group_chips(reps, verdict, live, stopping)}"
        # Which repetition the open row shows: the switcher's fragment fills it in.
        f'<span class="rep-shown" id="case-{first.pk}-shown"></span></summary>'
        f'<a class="permalink" href="{page_url(first.pk)}" title="link to this case"'
        f' aria-label="link to case {label}">¶</a>'
        f'<div class="turns" id="case-{first.pk}-turns" hx-preserve="true">'
        '<p class="muted small">loading turns…</p></div></details>\n'
    )


def _shown_first(reps: Sequence[Repetition]) -> Repetition:
    """The repetition an opened row shows first: the one running, else the first that failed
    (what a reader opens a flaky case for), else the first that ran."""
    for wanted in (
        lambda rep: rep.status == RUNNING,
        lambda rep: rep.outcome in FAILED_OUTCOMES,
        lambda rep: rep.status != PENDING,
    ):
        found = next((rep for rep in reps if wanted(rep)), None)
        if found is not None:
            return found
    return reps[0]


def _group_chips(reps: Sequence[Repetition], verdict: str, live: int, stopping: bool) -> str:
    """What a case's repetitions say together: passed of graded ("2/3 reps passed", as
    compare's cells count them), flaky, the ones not graded (or cancelled), and while some
    run, how many are done."""
    stats = repeat_stats(rep.outcome for rep in reps)
    chips = ""
    if stats.graded:
        chip = Outcome.of(verdict).chip if verdict else "chip-muted"
        chips += (
            f'<span class="chip {chip} repeat-rate" title="passed in'
            f" {stats.passed} of its {stats.graded} graded repetitions; the case passes when more"
            f' than half of them passed">{stats.passed}/{stats.graded} reps passed</span>'
        )
    if stats.flaky:
        chips += (
            '<span class="chip chip-warn flaky-mark" title="passed in some repetitions and'
            ' failed in others">flaky</span>'
        )
    others = Counter(rep.outcome for rep in reps if rep.outcome not in NOT_OTHER)
    if others:
        words = " · ".join(f"{count} {outcome_label(outcome)}" for outcome, count in others.items())
        chips += f'<span class="chip chip-muted reps-other">{escape(words)}</span>'
    if live and stopping and any(rep.status == RUNNING for rep in reps):
        chips += (
            '<span class="chip chip-cancelled case-stopping" title="the run was cancelled: a'
            ' repetition stops after its current turn">cancelled · stopping</span>'
        )
    elif live:
        chips += f'<span class="chip chip-running">{len(reps) - live}/{len(reps)} reps done</span>'
    return chips


def _pending_row(case: CaseRow, swap: str) -> str:
    count, state = case.turn_count, CaseState(case.status)
    return (
        f'<div class="case case-pending" id="case-{case.pk}"{swap}><div class="case-sum">'
        f'{_mark(case.outcome)}<span class="idx">#{ordinal(case.index)}</span>'
        f'<span class="name">{escape(case.label)}</span>'
        f'<span class="chip chip-muted">{count} turn{"" if count == 1 else "s"}</span>'
        f'<span class="chip {state.css}">{state.label}</span></div></div>\n'
    )


def _case_row(
    case: CaseRow,
    swap: str,
    turns_url: str,
    page_url: str,
    stopping: bool = False,
) -> str:
    label = escape(case.label)
    return (
        f'<details class="case case-{escape(case.outcome or case.status)}" id="case-{case.pk}"'
        f'{swap} hx-get="{turns_url}" hx-trigger="toggle once" hx-target="find .turns">'
        f'<summary class="case-sum">{_mark(case.outcome)}'
        f'<span class="idx">#{ordinal(case.index)}</span>'
        f'<span class="name">{label}</span>{case_chips(case, stopping)}'
        f'<span class="small muted">{format_duration(case.execution_time_ms)}</span></summary>'
        f'<a class="permalink" href="{page_url}" title="link to this case"'
        f' aria-label="link to case {label}">¶</a>'
        # Kept (hx-preserve) when the poll swaps the row in again: an open case keeps its
        # turns, which poll themselves while it runs.
        f'<div class="turns" id="case-{case.pk}-turns" hx-preserve="true">'
        '<p class="muted small">loading turns…</p></div></details>\n'
    )


@cache
def _mark(outcome: str) -> SafeString:
    """An outcome's mark (a handful of outcomes: drawn once each)."""
    return mark(outcome)


def _url_of(name: str, *args: int) -> Callable[[int], str]:
    """``reverse(name, args=[*args, pk])`` for many ``pk``: reversed once with a placeholder
    (the path's last number), then filled in; the URL resolver is too slow to call row by row."""
    head, tail = reverse(name, args=[*args, 0]).rsplit("/0/", 1)
    return lambda pk: f"{head}/{pk}/{tail}"


# --- the home page's projects ---------------------------------------------------------------


def project_rows_html(
    projects: Iterable[tuple[AgentProject, LastRun | None]], *, may_launch: Callable[[int], bool]
) -> SafeString:
    """One table row per project with its latest run (``selectors.projects_with_last_run``);
    ``may_launch(project id)``: whether its row has the launch button (the runner role)."""
    urls = _ProjectUrls(
        runs=reverse("run_list"),
        trends=reverse("trends"),
        run=_url_of("run_detail"),
        project=_url_of("project_detail"),
        launch=_url_of("project_launch"),
    )
    rows = (_project_row(project, run, urls, may_launch(project.pk)) for project, run in projects)
    return mark_safe("".join(rows))


@dataclass(frozen=True)
class _ProjectUrls:
    runs: str
    trends: str
    run: Callable[[int], str]
    project: Callable[[int], str]
    launch: Callable[[int], str]


def _project_row(
    project: AgentProject, run: LastRun | None, urls: _ProjectUrls, launch_button: bool
) -> str:
    pk = project.pk
    description = ""
    if project.description:
        text = project.description
        if len(text) > DESCRIPTION_CHARS:
            text = Truncator(text).chars(DESCRIPTION_CHARS)
        description = f'<div class="muted small">{escape(text)}</div>'
    launch = (
        f'<a class="btn btn-small" href="{urls.launch(pk)}">Launch…</a>' if launch_button else ""
    )
    last_run = (
        _last_run_cells(run, urls) if run else '<td colspan="6" class="muted">no runs yet</td>'
    )
    return (
        f'<tr>\n    <td><strong><a href="{urls.project(pk)}">{escape(project.name)}</a></strong>'
        f"{description}</td>\n"
        f'    <td class="mono small">{escape(project.agent_path)}</td>\n'
        f"    {last_run}\n"
        f'    <td class="actions">\n      <a href="{urls.runs}?project={pk}">runs</a>\n'
        f'      <a href="{urls.trends}?project={pk}">trends</a>\n      {launch}\n    </td>\n'
        "  </tr>\n"
    )


def partial_badge(text: str) -> str:
    """The partial badge (``Run.partial_text``), or "" for a run of every case."""
    if not text:
        return ""
    return (
        f' <span class="chip chip-warn partial-mark" title="run of a selection of the'
        " agent.yaml's cases (a limit, a filter, or a re-grade of the cases that ran): not the"
        f' whole result">{escape(text)}</span>'
    )


def _last_run_cells(run: LastRun, urls: _ProjectUrls) -> str:
    regrade_of = run.regrade_of_id
    regrade = (
        f' <span class="chip chip-regrade regrade-mark" data-regrade-of="{regrade_of}"'
        f' title="run #{regrade_of}\'s transcripts graded again; its commit is theirs">'
        f"re-grade of #{regrade_of}</span>"
        if regrade_of
        else ""
    )
    status = escape(run.status)
    reason = run.status_reason
    commit = escape(shortsha(run.git_commit)) or "–"
    partial = partial_badge(run.partial_text)
    unpassed = unpassed_counts(run.counts)
    return (
        f'<td><a href="{urls.run(run.id)}">#{run.id}</a>{regrade}{partial}</td>\n'
        f'    <td><span class="chip {reason.chip}" title="{escape(reason.sentence)}">'
        f"{status}</span></td>\n"
        f"    <td>{run.passed_cases}/{run.total_cases} passed{unpassed}</td>\n"
        f"    <td>{percent(run.pass_rate)}</td>\n"
        f'    <td class="mono">{commit}</td>\n'
        f'    <td class="small">{ago(run.created_at)}</td>'
    )

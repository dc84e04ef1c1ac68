"""Compare runs: headline deltas, the case x turn matrix, one case's turns in every compared run
side by side, config diff.

Every part of the compare page is filtered by metric kind (``?kinds=code,tools``), and every
setting is in the URL, so a filtered compare can be shared. The runs are laid out against the
baseline (the default) or in commit order (``?order=commits``), each run against the one before
it; the matrix can show a chosen metric's score deltas (``?metric=``, sorted and filtered by its
drops) and keep the cases where a text occurs (``?q=``).

The settings are read once into a ``ComparisonQuery`` (``runs.compare.pages.params``), and the rows
come from ``runs.compare.reads.compared_rows``, as ``GET /api/v1/compare``'s do. What the templates
show is built by ``view_models`` (the headline's lines, the matrix's rows, which
``matrix_html`` draws), ``case`` (the side by side's turns) and ``files`` (the config diff's
files).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.compare.pages.case import side_by_side
from runs.compare.pages.files import config_facts, config_text, files_compared
from runs.compare.pages.matrix_html import matrix_html
from runs.compare.pages.params import compare_query, side_by_side_query
from runs.compare.pages.view_models import (
    LEGEND,
    SHOW_LABELS,
    UNSTABLE_HINT,
    CellLinks,
    against_positions,
    columns_of,
    headline_lines,
    kind_changes,
    metric_choices,
    row_view,
    significance_lines,
)
from runs.compare.reads.compared_rows import ComparedRows, compare_rows, metric_agreement_texts
from runs.compare.reads.comparison import (
    MAX_RUNS,
    NoBaseline,
    RunsMissing,
    runs_for_compare,
    runs_for_config,
)
from runs.core.comparison.matrix import BASELINE_ORDER, COMMIT_ORDER, Row
from runs.core.comparison.query import SHOWS, SORTS
from runs.core.queryvalues import QueryValueError, parse_text
from runs.core.verdicts.kinds import KINDS
from runs.selectors.replays import replay_notes, run_prompt_text
from runs.selectors.snapshots import stored_snapshot
from runs.web.diffs import config_rows, line_diff
from runs.web.params import (
    BadParam,
    int_list_param,
    int_param,
    page_param,
    params_or_errors,
    shown_value,
    text_param,
)

if TYPE_CHECKING:
    from runs.models import Run

ROWS_PER_PAGE = 100
MAX_KEY = 600  # characters of a case's key (its name)

ORDER_LABELS = {
    BASELINE_ORDER: "against the baseline",
    COMMIT_ORDER: "in commit order, each against the one before",
}


# --- the compare page -----------------------------------------------------------------------


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    # A refused value shows the page's form again with the message at its field (a 400).
    query, errors = params_or_errors(request, compare_query)
    if not query.run_ids:
        context = {
            "empty": True,
            "max_runs": MAX_RUNS,
            "errors": errors,
            "bad_runs": shown_value(request, "runs", errors),
        }
        return render(request, "runs/compare.html", context, status=400 if errors else 200)
    try:
        found = compare_rows(query)
    except RunsMissing as exc:
        raise Http404(str(exc)) from None
    except NoBaseline as exc:
        context = {"alone": exc.run, "later": exc.later, "max_runs": MAX_RUNS}
        return render(request, "runs/compare.html", context)
    for name, message in found.errors.items():  # the settings the runs refuse
        errors.setdefault(name, message)
    page = Paginator(found.rows, ROWS_PER_PAGE).get_page(page_param(request, "page"))
    context = {
        **_setup_context(found),
        **_results_context(found, page),
        "errors": errors,
        "bad_min_drop": shown_value(request, "min_drop", errors),
        "bad_q": shown_value(request, "q", errors),
    }
    return render(request, "runs/compare.html", context, status=400 if errors else 200)


def _setup_context(found: ComparedRows) -> dict[str, Any]:
    """The runs, their baseline and the settings' form."""
    query, comparison, baseline = found.query, found.comparison, found.baseline
    state = query.state(runs=[run.pk for run in comparison.runs])
    return {
        "comparison": comparison,
        "baseline": baseline,
        "chosen": query.chosen is not None and baseline.rule == "chosen by you",
        "runs": comparison.runs,
        # The compared runs (every column but the reference: the baseline, or the oldest).
        "others": [run for run in comparison.runs if run.pk in comparison.matrix.against],
        "columns": columns_of(comparison),
        "kinds": query.kinds,
        "all_kinds": KINDS,
        "settings": query,
        "order": query.order,
        "chronological": query.order == COMMIT_ORDER,
        "order_links": [
            (value, label, _query(state, order="" if value == BASELINE_ORDER else value))
            for value, label in ORDER_LABELS.items()
        ],
        "show": query.show,
        "shows": [(value, SHOW_LABELS.get(value, value)) for value in SHOWS],
        "show_alias": query.show_alias,
        "unstable_hint": UNSTABLE_HINT,
        "sort": query.sort,
        "sorts": SORTS,
        "metric": query.metric,
        "metrics": metric_choices(comparison),
        "state": state,
        "query": _query(state),
        # The what-if replays among the runs, what each changed; a live run fills the page in.
        "replays": replay_notes(comparison.runs),
        "live_run": next((run for run in comparison.runs if run.is_live), None),
    }


def _results_context(found: ComparedRows, page: Page[Row]) -> dict[str, Any]:
    """The headline, the regressions and fixes by kind, and the page's rows of the matrix."""
    comparison = found.comparison
    links = CellLinks.of(comparison, found.query)
    views = [row_view(row, comparison, links) for row in page.object_list]
    against = against_positions(comparison.runs, comparison)
    lines = headline_lines(
        comparison.headlines,
        found.query.kinds,
        against,
        repeated=comparison.repeated,
        agreements=metric_agreement_texts(comparison.headlines),
    )
    return {
        "lines": lines + significance_lines(comparison),
        "significance": bool(comparison.significance),
        "legend": LEGEND,
        "kind_changes": kind_changes(comparison),
        "changed_cases": [
            headline.changed
            for headline in comparison.headlines
            if headline.run.pk in comparison.matrix.against
        ],
        "page": page,
        "rows": views,
        "matrix_html": matrix_html(views),
    }


def _query(state: dict[str, str], **changes: str) -> str:
    """The page's query string with ``changes`` (empty values left out)."""
    return urlencode({k: v for k, v in {**state, **changes}.items() if v})


# --- one case, every compared run, turn by turn ---------------------------------------------


@login_required
@require_GET
def compare_case(request: HttpRequest) -> HttpResponse:
    """The case ``key`` in every run of ``runs`` (2–12, as columns in that order), turn by
    turn (``turn``: only that one, by its stored index): each run against the baseline
    (``baseline``, one of them; by default the first) or, with ``order=commits``, against the
    run before it (3 queries)."""
    query = side_by_side_query(request)
    runs = _compared_runs(query.run_ids)
    key = case_key_param(request)
    if not key:
        raise BadRequest("?key= names the case to compare (its name, or #index)")
    chosen = int_param(request, "turn", maximum=10_000)
    side = side_by_side(runs, key, query)
    if side is None:
        raise Http404(f"no run has a case {key!r}")
    count = side.turn_total
    if chosen is not None and chosen >= count:
        raise BadRequest(
            f"?turn= is a turn's index: the case has {count} turn(s), 0 to {count - 1}"
        )
    base_query = side.query_state()
    sections = [
        replace(side.turn(index), only_link=_query(base_query, turn=str(index)))
        for index in (range(count) if chosen is None else [chosen])
    ]
    context = {
        **side.context(),
        "sections": sections,
        "chosen": chosen,
        "turn_links": [
            (index, _query(base_query, turn=str(index)), index == chosen) for index in range(count)
        ],
        "all_turns_link": _query(base_query),
        "back": "/compare/?" + _query(side.back_state()),
    }
    return render(request, "runs/compare_case.html", context)


def case_key_param(request: HttpRequest) -> str:
    """``?key=`` exactly as given, never stripped: a case's name may start with a newline or a
    space, and the matrix's link to it must find it (``urlencode`` quotes every character)."""
    try:
        return parse_text(request.GET.get("key", ""), max_length=MAX_KEY)
    except QueryValueError as error:
        raise BadParam("key", f"?key= {error}") from None


def _compared_runs(run_ids: list[int]) -> list[Run]:
    if len(run_ids) < 2:
        raise BadRequest(
            f"?runs= takes 2 to {MAX_RUNS} run ids: the baseline (or the oldest), then the runs "
            "to compare"
        )
    runs = runs_for_compare(run_ids)
    if len(runs) != len(run_ids):
        raise Http404("no such run")
    return runs


# --- config diff ----------------------------------------------------------------------------


@login_required
@require_GET
def compare_config(request: HttpRequest) -> HttpResponse:
    """The two runs' settings side by side, then every file of their snapshots that differs
    (a line diff each, for staff only: a snapshot may hold secrets) and which are identical;
    when a run has no snapshot (imported, or older than snapshots), the diff of their agent.yaml
    texts, saying why (1 query, 2 when files differ: their archives, whatever the number of
    files)."""
    run_ids = int_list_param(request, "runs", most=2)
    if len(run_ids) != 2:
        raise BadRequest("?runs= takes two run ids: the baseline, then the run to compare")
    full = text_param(request, "full", max_length=1000)
    runs = runs_for_config(run_ids)
    if len(runs) != 2:
        raise Http404("no such run")
    left, right = runs[run_ids[0]], runs[run_ids[1]]
    context: dict[str, Any] = {
        "left": left,
        "right": right,
        "rows": config_rows(config_facts(left), config_facts(right)),
        "full": full,
        "prompt_diff": _prompt_diff(left, right),
    }
    if left.snapshot is not None and right.snapshot is not None:
        context["files"] = files_compared(
            (left.pk, stored_snapshot(left.snapshot)),
            (right.pk, stored_snapshot(right.snapshot)),
            full=full,
            contents=request.user.is_staff,
        )
        return render(request, "runs/compare_config.html", context)
    yaml_left, yaml_right = config_text(left), config_text(right)
    context |= {
        "no_snapshot": [run for run in (left, right) if run.snapshot is None],
        "diff": line_diff(yaml_left, yaml_right, labels=(f"run #{left.pk}", f"run #{right.pk}")),
        "from_snapshot": not (left.raw_yaml and right.raw_yaml),
        "same": yaml_left == yaml_right,
    }
    return render(request, "runs/compare_config.html", context)


def _prompt_diff(left: Run, right: Run) -> list[Any] | None:
    """The lines of the system prompt a what-if replay changed, when either run is one that
    did (a changed instructions file shows among the files); None otherwise."""
    picks = [run.run_options.replay for run in (left, right)]
    if not any(pick is not None and pick.prompt is not None for pick in picks):
        return None
    right_pick = picks[1]
    if right_pick is not None and right_pick.of == left.pk and right_pick.prompt is not None:
        before, after = right_pick.prompt_before, right_pick.prompt
    else:
        before, after = run_prompt_text(left) or "", run_prompt_text(right) or ""
    if before == after:
        return None
    return line_diff(before, after, labels=(f"run #{left.pk}", f"run #{right.pk}"))

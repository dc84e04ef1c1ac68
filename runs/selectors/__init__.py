"""Reads: every row a page, an API endpoint or a service shows is read here.

Each function returns what one screen needs in a fixed number of queries, whatever the size of
the run: lists read the summary columns, turn details are fetched only for one case. Verdicts
are stored when a result is written; nothing here recomputes them. Views and API routers import
no model: they call these (import-linter checks it).

- ``projects``: the projects, one project, its pass-rate series;
- ``partial``: a run's partial badge read as columns (lists that do not load ``Run.options``);
- ``runs``: the runs list (filters, facets), one run and its summary (stored, or live while
  it runs);
- ``cases``: a run's case rows, one case with its turns and metrics, and its summary;
- ``export``: a run as a HoloDeck EvalRun;
- ``compare``: the compare page and API (``comparison_for``), the gate's comparison;
- ``trends``: the trends page's runs and metric averages;
- ``tokens``: a user's API tokens;
- ``snapshots``: the snapshot a run ran (manifest, archive, a few of its files).

The names of the first four are re-exported here (``selectors.run_get``).
"""

from runs.selectors.case_counts import list_count_stored, listed, repeats_stored
from runs.selectors.cases import (
    CASE_OUTCOMES,
    CASE_PAGE_UNUSED_RUN_FIELDS,
    CASE_ROW_FIELDS,
    TOOL_VERDICTS,
    CaseFilters,
    MetricFailureList,
    case_get,
    case_group_indices,
    case_groups,
    case_groups_changed_since,
    case_repeat_stats,
    case_repetitions,
    case_rows,
    case_rows_changed_since,
    case_run_repeats,
    case_score_spreads,
    case_summary,
    case_version,
    case_version_get,
    next_failed_case,
    turn_repeat_stats,
)
from runs.selectors.export import run_eval_run
from runs.selectors.projects import (
    project_choices,
    project_find,
    project_get,
    project_list,
    project_listed,
    projects_with_last_run,
)
from runs.selectors.runs import (
    MODEL_NAME,
    PROMPT_TAGS,
    PROMPT_VERSION,
    RUN_PROGRESS_FIELDS,
    RUN_STATUSES,
    JSONListHas,
    RunFacets,
    RunListFilters,
    agent_names,
    run_facets,
    run_get,
    run_list,
    run_progress_get,
    run_row,
    run_status_reason_get,
    run_summary,
    run_summary_now,
)

__all__ = [
    "CASE_OUTCOMES",
    "CASE_PAGE_UNUSED_RUN_FIELDS",
    "CASE_ROW_FIELDS",
    "MODEL_NAME",
    "PROMPT_TAGS",
    "PROMPT_VERSION",
    "RUN_PROGRESS_FIELDS",
    "RUN_STATUSES",
    "TOOL_VERDICTS",
    "CaseFilters",
    "JSONListHas",
    "MetricFailureList",
    "RunFacets",
    "RunListFilters",
    "agent_names",
    "case_get",
    "case_group_indices",
    "case_groups",
    "case_groups_changed_since",
    "case_repeat_stats",
    "case_repetitions",
    "case_rows",
    "case_rows_changed_since",
    "case_run_repeats",
    "case_score_spreads",
    "case_summary",
    "case_version",
    "case_version_get",
    "list_count_stored",
    "listed",
    "next_failed_case",
    "project_choices",
    "project_find",
    "project_get",
    "project_list",
    "project_listed",
    "projects_with_last_run",
    "repeats_stored",
    "run_eval_run",
    "run_facets",
    "run_get",
    "run_list",
    "run_progress_get",
    "run_row",
    "run_status_reason_get",
    "run_summary",
    "run_summary_now",
    "turn_repeat_stats",
]

"""Comparing stored runs: the matrix, regressions and fixes by kind, the baseline rule, the
per-turn side-by-side and the config diff."""

from __future__ import annotations

import re
from datetime import timedelta
from html import escape, unescape
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from runs.core.verdicts.outcomes import Outcome
from runs.models import AgentProject, CaseRow, Run, TurnRow
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import git

pytestmark = pytest.mark.django_db


def compare(client: Client, *runs: Run, **params: str) -> Any:
    response = client.get(reverse("compare"), {"runs": ",".join(str(r.pk) for r in runs), **params})
    assert response.status_code == 200, response.content[:2000]
    return response


def later(minutes: int) -> Any:
    return timezone.now() + timedelta(minutes=minutes)


def regressed_pair(project: AgentProject) -> tuple[Run, Run]:
    """A baseline where every case passes, and a later run where case 1's turn 1 fails its
    standard metric, code grader and tool assertion, and its judge could not grade."""
    base = build_run(project, RunSpec(cases=4, turns=2, failing=(), status=Run.Status.PASSED))
    later_run = build_run(project, RunSpec(cases=4, turns=2, failing=(1,)), created_at=later(5))
    same_names(later_run)
    return base, later_run


def same_names(*runs: Run) -> None:
    """The factory names failing cases apart; here a case keeps its name from run to run."""
    for case in CaseRow.objects.filter(run__in=runs, name__startswith="failing "):
        CaseRow.objects.filter(pk=case.pk).update(name=case.name.removeprefix("failing "))


def test_a_regressed_turn_is_counted_per_kind(viewer_client: Client, project: AgentProject) -> None:
    base, run = regressed_pair(project)
    context = compare(viewer_client, base, run, baseline=str(base.pk)).context
    counts = dict(context["kind_changes"])
    assert counts["standard"] == [(1, 0)]
    assert counts["code"] == [(1, 0)]
    assert counts["tools"] == [(1, 0)]
    assert counts["geval"] == [(0, 0)]  # not graded is never a regression
    assert counts["rag"] == [(0, 0)]
    (row,) = [v.row for v in context["rows"] if v.row.regressions]
    assert row.key == "refund case 1"


def test_the_same_pair_against_the_newer_run_still_reads_forward_in_time(
    viewer_client: Client, project: AgentProject
) -> None:
    # The older run is the column, the newer the baseline: its change still reads from old to
    # new (it regressed), never the other way round (issue 38: compare's words follow time).
    base, run = regressed_pair(project)
    response = compare(viewer_client, base, run, baseline=str(run.pk))
    assert dict(response.context["kind_changes"])["code"] == [(1, 0)]
    assert f'data-older-than="{run.pk}"' in response.text
    assert "read forward in time" in response.text


def test_aligning_by_name_keeps_cases_of_one_run_only_as_absent(
    viewer_client: Client, project: AgentProject
) -> None:
    base = build_run(project, RunSpec(cases=3, turns=1, failing=()))
    run = build_run(project, RunSpec(cases=5, turns=1, failing=()), created_at=later(5))
    CaseRow.objects.filter(run=base, index=0).update(name="only in the baseline")
    context = compare(viewer_client, base, run, baseline=str(base.pk), show="partial").context
    partial = {view.row.key: [cell.verdict for cell in view.cells] for view in context["rows"]}
    assert partial == {
        "only in the baseline": ["passed", "absent"],
        "refund case 0": ["absent", "passed"],
        "refund case 3": ["absent", "passed"],
        "refund case 4": ["absent", "passed"],
    }
    assert all(isinstance(cell.verdict, Outcome) for view in context["rows"] for cell in view.cells)


def test_the_kind_filter_changes_the_matrix_not_the_runs_own_counts(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)

    def state(kinds: str) -> tuple[list[str], dict[str, list[str]], list[str]]:
        context = compare(viewer_client, base, run, baseline=str(base.pk), kinds=kinds).context
        row = next(v for v in context["rows"] if v.row.index == 1)
        lines = {line.label: [cell.text for cell in line.cells] for line in context["lines"]}
        return [c.verdict for c in row.cells], lines, list(dict(context["kind_changes"]))

    cells, lines, kinds = state("code")
    assert cells == ["passed", "failed"] and kinds == ["code"]
    assert lines["pass rate"] == ["100%", "75%"]  # the runs' own, whatever the filter
    assert lines["pass rate, code only"] == ["100%", "75%"]
    assert "rouge" not in lines and "refund_grader" in lines  # metrics of the kind only
    cells, lines, kinds = state("geval")
    assert cells == ["passed", "not_graded"]
    assert lines["pass rate, geval only"] == ["100%", "100%"]  # 3 graded cases, all passed
    assert lines["pass rate"] == ["100%", "75%"] and lines["cases failed"] == ["0", "1"]
    cells, lines, kinds = state("rag")
    assert cells == ["none", "none"] and kinds == ["rag"]  # nothing of that kind ran
    assert lines["pass rate, rag only"] == ["–", "–"]  # nothing graded: no pass rate
    cells, lines, _ = state("")
    assert cells == ["passed", "failed"]
    assert not any(label.endswith(" only") for label in lines)


def test_not_graded_is_counted_apart_never_as_a_pass_or_a_failure(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    context = compare(viewer_client, base, run, baseline=str(base.pk), kinds="geval").context
    lines = {line.label: [cell.text for cell in line.cells] for line in context["lines"]}
    # The runs' own counts: case 1 failed (its code grader and tools failed, its judge could
    # not grade); under the geval filter its cell is not graded, never a regression.
    assert lines["cases passed"] == ["4", "3"] and lines["cases failed"] == ["0", "1"]
    assert "turns not graded" not in lines  # every turn with a verdict failed or passed
    row = next(v for v in context["rows"] if v.row.index == 1)
    assert [cell.verdict for cell in row.cells] == ["passed", "not_graded"]
    assert row.row.regressions == 0


def test_the_headline_shows_each_runs_summary_with_metrics_counted_per_turn(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    context = compare(viewer_client, base, run, baseline=str(base.pk)).context
    lines = {line.label: line for line in context["lines"]}
    assert [cell.text for cell in lines["cases passed"].cells] == ["4", "3"]
    assert [cell.text for cell in lines["turns failed"].cells] == ["0", "1"]
    assert [cell.trend for cell in lines["cases failed"].cells] == ["", "worse"]
    rouge = lines["rouge"]
    assert [cell.metric.evaluated for cell in rouge.cells if cell.metric] == [8, 8]
    assert [cell.metric.failed for cell in rouge.cells if cell.metric] == [0, 1]
    politeness = lines["politeness"]
    assert [cell.metric.not_graded for cell in politeness.cells if cell.metric] == [0, 1]
    assert "cases errored" not in lines  # no run has any


def test_a_run_with_nothing_graded_has_no_pass_rate_never_0_percent(
    viewer_client: Client, project: AgentProject
) -> None:
    base = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    run = build_run(project, RunSpec(cases=2, turns=1, failing=()), created_at=later(5))
    CaseRow.objects.filter(run=run).update(outcome="not_graded")
    response = compare(viewer_client, base, run, baseline=str(base.pk))
    lines = {line.label: [cell.text for cell in line.cells] for line in response.context["lines"]}
    assert lines["pass rate"] == ["100%", "–"]
    assert lines["cases not graded"] == ["0", "2"]
    assert f'data-run="{run.pk}"><span data-summary="pass_rate">–</span>' in response.text


def test_regressions_fixes_and_rows_that_changed_back_and_forth_can_be_shown_alone(
    viewer_client: Client, project: AgentProject
) -> None:
    base = build_run(project, RunSpec(cases=4, turns=1, failing=(2,)))
    worse = build_run(project, RunSpec(cases=4, turns=1, failing=(1, 2)), created_at=later(1))
    better = build_run(project, RunSpec(cases=4, turns=1, failing=()), created_at=later(2))
    same_names(base, worse, better)

    def keys(show: str) -> list[str]:
        context = compare(
            viewer_client, base, worse, better, baseline=str(base.pk), show=show
        ).context
        return [view.row.key for view in context["rows"]]

    assert keys("regressions") == ["refund case 1"]
    assert keys("fixes") == ["refund case 2"]
    # Case 1 passed, failed, then passed again along the runs in time order; case 2 failed
    # twice, then passed: it changed once, it did not go back and forth.
    assert keys("unstable") == ["refund case 1"]
    assert len(keys("all")) == 4


# --- the baseline -----------------------------------------------------------------------------


def three_commits(tmp_path: Path) -> list[str]:
    git(tmp_path, "init", "-q", "-b", "main")
    commits = []
    for n in range(3):
        (tmp_path / "agent.yaml").write_text(f"name: a{n}\n")
        git(tmp_path, "add", "-A")
        git(tmp_path, "commit", "-qm", f"commit {n}")
        commits.append(git(tmp_path, "rev-parse", "HEAD"))
    return commits


def test_the_default_baseline_is_the_latest_run_of_the_parent_commit(
    viewer_client: Client, tmp_path: Path
) -> None:
    first, second, third = three_commits(tmp_path)
    project = make_project("git-agent", str(tmp_path))

    def run_at(commit: str, minutes: int, status: str = Run.Status.PASSED) -> Run:
        spec = RunSpec(cases=2, turns=1, failing=(), git_commit=commit, status=status)
        return build_run(project, spec, created_at=later(minutes))

    run_at(first, 1)
    older_of_parent = run_at(second, 2)
    of_parent = run_at(second, 3)
    run_at(second, 4, status=Run.Status.CANCELLED)  # not finished: never a baseline
    other_branch_later = run_at(first, 5)
    subject = run_at(third, 6)
    context = compare(viewer_client, subject).context
    assert context["baseline"].run.pk == of_parent.pk
    assert "parent commit" in context["baseline"].rule and context["baseline"].added
    assert older_of_parent.pk != of_parent.pk
    # Among runs picked by hand, without one of the parent commit: the latest earlier one.
    context = compare(viewer_client, other_branch_later, subject).context
    assert context["baseline"].run.pk == other_branch_later.pk
    assert "latest earlier finished run of main" in context["baseline"].rule
    # The user can choose another.
    context = compare(viewer_client, other_branch_later, subject, baseline=str(subject.pk)).context
    assert context["baseline"].run.pk == subject.pk and context["baseline"].rule == "chosen by you"
    assert "parent commit" in compare(viewer_client, subject).text


# --- side by side, config diff, escaping ------------------------------------------------------


SCRIPT = "<script>alert(1)</script>"


def test_a_case_side_by_side_diffs_responses_and_tool_calls_as_text(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    name = "refund case 1"
    turn = TurnRow.objects.get(case__run=run, case__index=1, index=1)
    turn.response = f"The refund is {SCRIPT} 41.00 EUR"
    turn.tool_invocations[0]["args"] = {"order_id": SCRIPT}
    turn.grader_details = {"refund_grader": {"note": SCRIPT}}
    turn.save()
    response = viewer_client.get(
        reverse("compare_case"), {"runs": f"{base.pk},{run.pk}", "key": name}
    )
    assert response.status_code == 200
    html = response.text
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "<ins>" in html and "<del>" in html  # the word diff
    assert "arg order_id" in html  # the tool-call diff names the changed argument
    assert "regression" in html


def test_the_config_diff_shows_the_agent_yaml_change_and_the_model_as_text(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    Run.objects.filter(pk=base.pk).update(
        raw_yaml="name: a\nmodel: {provider: openai, name: gpt-4o}\n",
        config_snapshot={"model": {"provider": "openai", "name": "gpt-4o"}},
    )
    Run.objects.filter(pk=run.pk).update(
        raw_yaml=f"name: a\nmodel: {{provider: openai, name: gpt-4.1}}\n# {SCRIPT}\n",
        config_snapshot={"model": {"provider": "openai", "name": "gpt-4.1"}},
    )
    response = viewer_client.get(reverse("compare_config"), {"runs": f"{base.pk},{run.pk}"})
    assert response.status_code == 200
    html = response.text
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "dl-add" in html and "dl-del" in html and "gpt-4.1" in html
    context = response.context
    assert [row.label for row in context["rows"] if row.changed] == ["model"]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"runs": "1,x"}, "takes run ids"),
        ({"runs": ",".join(str(n) for n in range(1, 15))}, "takes at most 12 values, got 14"),
    ],
)
def test_bad_run_ids_show_the_run_ids_form_with_the_error_at_the_field(
    viewer_client: Client, params: dict[str, str], message: str
) -> None:
    response = viewer_client.get(reverse("compare"), params)
    assert response.status_code == 400
    html = response.text
    assert f'<span class="field-error" id="runs-error">{message}' in html
    field = f'name="runs" placeholder="12,15,19" class="mono" size="20" value="{params["runs"]}"'
    assert field in html


@pytest.mark.parametrize(
    "params, field, message",
    [
        ({"kinds": "vibes"}, "kinds", "takes standard, rag, geval, code, tools"),
        ({"show": "everything"}, "show", "must be one of"),
        ({"sort": "x"}, "sort", "must be one of"),
        ({"baseline": "x"}, "baseline", "is not a whole number"),
    ],
)
def test_a_bad_compare_setting_shows_the_comparison_with_the_error_at_its_field(
    viewer_client: Client, project: AgentProject, params: dict[str, str], field: str, message: str
) -> None:
    base, run = regressed_pair(project)
    response = viewer_client.get(reverse("compare"), {"runs": f"{base.pk},{run.pk}", **params})
    assert response.status_code == 400
    html = response.text
    assert 'id="compare-form"' in html and "Cases × runs" in html  # left out, the rest shown
    error = re.search(rf'<span class="field-error" id="{field}-error">([^<]*)</span>', html)
    assert error and message in error.group(1)
    assert "1 setting could not be used" in html


def test_an_unknown_run_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get(reverse("compare"), {"runs": "999999"}).status_code == 404


def test_the_compare_page_without_runs_says_how_to_pick_them(viewer_client: Client) -> None:
    response = viewer_client.get(reverse("compare"))
    assert response.status_code == 200 and "runs list" in response.text


# --- imported history -------------------------------------------------------------------------


def test_the_24_imported_holodeck_runs_compare_without_errors(
    viewer_client: Client, shared_dir: Path
) -> None:
    from runs.services.history import runs_import

    runs = runs_import([shared_dir / "fixtures" / "holodeck" / "seed_runs.json"]).imported
    first, last = runs[0], runs[-1]
    context = compare(viewer_client, first, last).context
    assert context["baseline"].run.pk == first.pk
    assert len(context["rows"]) == first.total_cases
    alone = compare(viewer_client, last).context  # baseline by rule among the agent's runs
    assert alone["baseline"].run.pk == runs[-2].pk
    some = compare(viewer_client, *runs[:12]).context
    assert len(some["runs"]) == 12


def test_the_api_kind_type_is_the_kinds_module() -> None:
    from typing import get_args

    from runs.compare.api import Kind
    from runs.core.verdicts.kinds import KINDS

    assert get_args(Kind) == KINDS


def test_the_api_show_type_is_the_pages_filters() -> None:
    from typing import get_args

    from runs.compare.api import Show
    from runs.core.comparison.query import SHOW_ALIASES, SHOWS

    assert get_args(Show) == (*SHOWS, *SHOW_ALIASES)


# --- numbering and the lone run -------------------------------------------------------------


def test_the_matrix_and_the_side_by_side_number_turns_from_one(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    html = compare(viewer_client, base, run, baseline=str(base.pk)).text
    assert 'title="turn 1 of 2: passed"' in html
    assert 'title="turn 2 of 2: failed (regression)"' in html
    assert "turn 0" not in html
    side = viewer_client.get(
        reverse("compare_case"), {"runs": f"{base.pk},{run.pk}", "key": "refund case 1"}
    ).text
    assert ">Turn 1 of 2</h2>" in side
    assert '>Turn 2 of 2 <span class="chip worse-chip">regression</span></h2>' in side
    assert 'id="turn-2"' in side  # anchors count from 1, as the headings (the gate links to it)
    assert 'id="turn-0"' not in side


def test_compare_with_baseline_on_the_earliest_run_says_no_earlier_run(
    viewer_client: Client, project: AgentProject
) -> None:
    first = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    second = build_run(project, RunSpec(cases=1, turns=1, failing=()), created_at=later(5))
    build_run(project, RunSpec(cases=1, turns=1, failing=()), created_at=later(9))
    html = compare(viewer_client, first).text
    assert "there is no earlier run to compare it with" in html
    assert "no other run" not in html
    link = f"{reverse('compare')}?runs={first.pk},{second.pk}&amp;baseline={first.pk}"
    assert f'href="{link}"' in html


def test_compare_with_baseline_on_the_only_run_says_there_is_no_other_run(
    viewer_client: Client, project: AgentProject
) -> None:
    only = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    html = compare(viewer_client, only).text
    assert "There is no other run of" in html
    assert "earlier" not in html


# --- what counts: a row whose verdicts differ is changed; a regression is a graded pass broken


def cancelled_then_failed(project: AgentProject) -> tuple[Run, Run]:
    """Case 0 stopped by a cancel in the first run (two turns passed, two skipped) and, with
    the very same turn verdicts, "failed" in the second: as a re-grade of a cancelled run read
    before issue 27."""
    first = build_run(project, RunSpec(cases=3, turns=4, failing=(), status=Run.Status.CANCELLED))
    second = build_run(project, RunSpec(cases=3, turns=4, failing=()), created_at=later(5))
    TurnRow.objects.filter(run__in=[first, second], case__index=0, index__gte=2).update(
        outcome="skipped", passed=False, kind_outcomes={}, skipped=True
    )
    CaseRow.objects.filter(run=first, index=0).update(
        status=CaseRow.Status.CANCELLED, outcome="cancelled", passed=None
    )
    CaseRow.objects.filter(run=second, index=0).update(outcome="failed", passed=False)
    return first, second


def test_a_case_cancelled_then_failed_is_changed_in_every_count_but_no_regression(
    viewer_client: Client, project: AgentProject
) -> None:
    first, second = cancelled_then_failed(project)
    key = "refund case 0"

    def keys(**params: str) -> list[str]:
        context = compare(viewer_client, first, second, baseline=str(first.pk), **params).context
        return [view.row.key for view in context["rows"]]

    context = compare(viewer_client, first, second, baseline=str(first.pk)).context
    (view,) = [view for view in context["rows"] if view.row.key == key]
    assert [cell.verdict for cell in view.cells] == [Outcome.CANCELLED, Outcome.FAILED]
    # No turn went from a graded pass to a fail: not a regression, anywhere...
    assert keys(show="regressions") == [] and keys(show="fixes") == []
    assert all(counts == [(0, 0)] for _, counts in context["kind_changes"])
    # ...but the row shows two verdicts, so it is changed, and counted so.
    assert keys(show="changed") == [key]
    assert context["changed_cases"] == [1]
    html = compare(viewer_client, first, second, baseline=str(first.pk)).text
    row = re.search(rf'<tr class="matrix-row[^"]*" data-key="{key}">(.*?)</tr>', html, re.S)
    assert row is not None and "cancelled → failed" in row.group(1)
    assert "regressed" not in row.group(1)
    assert re.search(r"<span data-changed-cases>1</span> case<", html)
    # The headline counts the cancelled case too, as the cells show it.
    lines = {line.label: [cell.text for cell in line.cells] for line in context["lines"]}
    assert lines["cases cancelled"] == ["1", "0"] and lines["cases failed"] == ["0", "1"]


def test_the_compare_api_filters_and_counts_rows_as_the_page_does(project: AgentProject) -> None:
    from runs.services.tokens import token_create
    from tests.web.factories import make_user

    first, second = cancelled_then_failed(project)
    _, secret = token_create(user=make_user("ci"), name="ci")
    client = Client(headers={"Authorization": f"Bearer {secret}"})

    def api(**params: str) -> Any:
        response = client.get("/api/v1/compare", {"runs": [first.pk, second.pk], **params})
        assert response.status_code == 200, response.content[:2000]
        return response.json()

    data = api(baseline=str(first.pk), show="changed")
    assert [row["key"] for row in data["rows"]] == ["refund case 0"] and data["row_count"] == 1
    (row,) = data["rows"]
    assert row["changed"] and row["changed_in"] == [second.pk] and row["regressions"] == 0
    assert row["cells"] == {str(first.pk): "cancelled", str(second.pk): "failed"}
    assert api(baseline=str(first.pk), show="regressions")["rows"] == []
    headline = {h["run_id"]: h for h in data["headline"]}
    assert (headline[second.pk]["changed"], headline[second.pk]["regressions"]) == (1, 0)


def test_the_page_and_the_api_take_runs_comma_separated_or_repeated(
    viewer_client: Client, project: AgentProject
) -> None:
    base, run = regressed_pair(project)
    joined: dict[str, Any] = {"runs": f"{base.pk},{run.pk}"}
    repeated: dict[str, Any] = {"runs": [base.pk, run.pk]}
    pages = [viewer_client.get(reverse("compare"), given).text for given in (joined, repeated)]
    matrices = [page[page.index('<table class="grid matrix">') :] for page in pages]
    assert "refund case 1" in matrices[0] and matrices[0] == matrices[1]
    api = viewer_client.get("/api/v1/compare", {**joined, "kinds": "standard,tools"})
    assert api.status_code == 200, api.content[:500]
    again = viewer_client.get("/api/v1/compare", {**repeated, "kinds": ["standard", "tools"]})
    assert api.json() == again.json() and api.json()["runs"] == [base.pk, run.pk]
    csv_api = viewer_client.get("/api/v1/compare.csv", joined)
    assert csv_api.status_code == 200
    assert viewer_client.get("/api/v1/compare", {"runs": f"{base.pk},x"}).status_code == 422


@pytest.mark.parametrize("name", ["\n=1+2", " refunds/EU?currency=€&page=2#top "])
def test_the_matrixs_link_to_a_case_finds_it_whatever_its_name_holds(
    viewer_client: Client, project: AgentProject, name: str
) -> None:
    base, run = regressed_pair(project)
    CaseRow.objects.filter(run__in=(base, run), index=1).update(name=name)
    html = compare(viewer_client, base, run).text
    query = urlencode({"key": name})
    links = {unescape(href) for href in re.findall(r'href="(/compare/case/\?[^"]+)"', html)}
    found = [link for link in links if query in link]
    assert found, query  # the regressed cell's link, and its turn's
    for link in found:
        side = viewer_client.get(link.split("#")[0])
        assert side.status_code == 200, (link, side.content[:300])
        assert escape(name.strip()) in side.text
        if "#turn-" in link:  # the turn it points at, counted from 1
            assert f'id="turn-{link.split("#turn-")[1]}"' in side.text


# --- words and order -------------------------------------------------------------------------


def test_one_turn_graded_is_said_in_the_singular(
    viewer_client: Client, project: AgentProject
) -> None:
    first = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    second = build_run(project, RunSpec(cases=1, turns=1, failing=()), created_at=later(5))
    html = compare(viewer_client, first, second).text
    assert re.search(r">1</span> turn graded:", html)
    assert "turns graded" not in html.replace(">1</span> turn graded", "")


def test_the_baseline_of_a_run_without_a_branch_is_said_in_plain_words(
    viewer_client: Client, project: AgentProject
) -> None:
    first = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    second = build_run(project, RunSpec(cases=2, turns=1, failing=()), created_at=later(5))
    Run.objects.filter(pk__in=[first.pk, second.pk]).update(git_branch="")
    context = compare(viewer_client, first, second).context
    assert context["baseline"].run.pk == first.pk
    assert "no branch" not in context["baseline"].rule
    assert "without a branch" in context["baseline"].rule


def test_the_columns_are_oldest_first_even_against_a_newer_baseline(
    viewer_client: Client, project: AgentProject
) -> None:
    older = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    newer = build_run(project, RunSpec(cases=2, turns=1, failing=(1,)), created_at=later(5))
    same_names(older, newer)
    response = compare(viewer_client, newer, older, baseline=str(newer.pk))
    context = response.context
    assert context["baseline"].run.pk == newer.pk
    assert [run.pk for run in context["runs"]] == [older.pk, newer.pk]
    assert [c.against.pk if c.against else None for c in context["columns"]] == [newer.pk, None]
    heads = re.findall(r"<th>(baseline )?#(\d+)", response.text.split('class="grid matrix"')[1])
    assert heads[:2] == [("", str(older.pk)), ("baseline ", str(newer.pk))]
    # Against the newer baseline the older run's change reads forward in time: case 1 passed
    # in it and fails in the newer one, so it regressed (never "fixed"); the baseline is
    # named in the side by side's link.
    assert dict(context["kind_changes"])["code"] == [(1, 0)]
    (view,) = [view for view in context["rows"] if view.row.key == "refund case 1"]
    assert f"baseline={newer.pk}" in view.cells[0].link
    side = viewer_client.get(view.cells[0].link.split("#")[0])
    assert side.status_code == 200
    assert [c.against.pk if c.against else None for c in side.context["columns"]] == [
        newer.pk,
        None,
    ]

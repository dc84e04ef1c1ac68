"""End to end in a real browser: two runs of one project at two commits, launched from the
browser and run by a real Celery worker; Compare filtered to code graders shows the regression,
then the regressed turn side by side and the config diff."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project, git
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot
from tests.web.test_browser_launch import celery_worker_thread

__all__ = ["browser_page", "celery_worker_thread"]  # fixtures, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def launch_at(page: Any, live_server: Any, project_pk: int, ref: str) -> Run:
    page.goto(f"{live_server.url}{reverse('project_launch', args=[project_pk])}")
    page.fill("input[name=git_ref]", ref)
    page.click("form.launch-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=90_000)
    return Run.objects.get(pk=run_id)


def test_a_grader_made_stricter_in_a_commit_shows_as_a_code_regression_in_compare(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    project = example_project(tmp_path)
    repo = Path(project.directory)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the example as shipped")
    first = git(repo, "rev-parse", "HEAD")
    grader = repo / "graders" / "program.py"
    grader.write_text(
        grader.read_text()
        .replace("REL_TOL = 0.01", "REL_TOL = 1e-12")
        .replace("ABS_TOL = 1e-4", "ABS_TOL = 0.0")
    )
    agent = repo / "agent.yaml"
    agent.write_text(agent.read_text().replace("name: convfinqa-analyst", "name: convfinqa-strict"))
    git(repo, "commit", "-qam", "exact answers only")
    second = git(repo, "rev-parse", "HEAD")

    login(page, live_server, make_user("lead", staff=True))
    before = launch_at(page, live_server, project.pk, first[:10])
    after = launch_at(page, live_server, project.pk, second[:10])
    assert (before.git_commit, after.git_commit) == (first, second)
    assert (before.status, after.status) == ("failed", "failed")

    # Compare the new run with its baseline: the run of the parent commit, found by the rule.
    page.goto(f"{live_server.url}{reverse('compare')}?runs={after.pk}")
    assert f"run #{before.pk}" in page.locator(".baseline-rule").inner_text()
    assert "parent commit" in page.locator(".baseline-rule").inner_text()
    page.check("input[name=kinds][value=code]")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(re.compile(r".*kinds=code.*"))
    count = page.locator(".regressions-count[data-kind=code]").inner_text()
    regressed = int(count.split()[0])
    assert regressed >= 3, count
    assert page.locator("tr.has-regression").count() >= 2
    screenshot(page, "compare-code-regressions")

    page.locator("tr.has-regression").first.locator("td.cell a.cv-failed").click()
    page.wait_for_url(re.compile(r".*/compare/case/.*"))
    assert page.locator(".turn-pair.regression").count() >= 1
    assert "is not" in page.locator(".turn-pair.regression").first.inner_text()  # the reasoning
    screenshot(page, "compare-turn-side-by-side")

    page.click("text=config diff")
    page.wait_for_url(re.compile(r".*/compare/config/.*"))
    assert page.locator(".dl-add").filter(has_text="convfinqa-strict").count() == 1
    assert page.locator(".dl-del").filter(has_text="convfinqa-analyst").count() == 1
    screenshot(page, "compare-config-diff")


def test_a_reviewer_reads_three_runs_in_commit_order_by_a_metrics_drop_and_a_searched_output(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from tests.compare.compare_data import LOST, three_runs
    from tests.web.factories import make_project

    page = browser_page
    data = three_runs(make_project())
    subject = "Refunds: round to the cent in every currency, " + "and say so " * 10
    Run.objects.filter(pk=data.newest.pk).update(git_subject=subject)
    login(page, live_server, make_user("reviewer"))
    # Given newest first, as a tray might hold them: the baseline rule picks the middle run.
    ids = [data.newest.pk, data.oldest.pk, data.middle.pk]
    page.goto(f"{live_server.url}{reverse('compare')}?runs={','.join(map(str, ids))}")
    assert f"run #{data.middle.pk}" in page.locator(".baseline-rule").inner_text()

    # Chronological: oldest first, each column against the one before it.
    page.click(".order-toggle a.order-commits")
    page.wait_for_url(re.compile(r".*order=commits.*"))
    heads = [" ".join(t.split()) for t in page.locator("table.matrix thead th").all_text_contents()]
    assert heads[1:4] == [
        f"oldest #{data.oldest.pk}",
        f"#{data.middle.pk} vs #{data.oldest.pk}",
        f"#{data.newest.pk} vs #{data.middle.pk}",
    ]
    row = page.locator('tr.matrix-row[data-key="refund case 1"]')
    assert "changed back and forth" in row.inner_text()
    assert "flaky" not in page.locator("table.matrix").inner_text()

    # The newest run's commit subject in its column's header, cut to its width, whole in its
    # title; the CSV of the compare: a row per case and run, with the subject.
    shown = page.locator("table.headline thead .commit-subject")
    assert shown.count() == 1 and shown.get_attribute("title") == subject
    assert shown.evaluate("span => span.scrollWidth > span.clientWidth")  # an ellipsis
    with page.expect_download() as downloaded:
        page.click("a.csv-link")
    download = downloaded.value
    assert download.suggested_filename == f"compare-runs-{data.ids.replace(',', '-')}.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text())))
    assert len(rows) == 6 * 3
    assert {row["commit_subject"] for row in rows if row["run_id"] == str(data.newest.pk)} == {
        subject
    }

    # A metric's deltas, largest drop first.
    page.select_option("select[name=metric]", "rouge")
    page.select_option("select[name=sort]", "delta")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(re.compile(r".*metric=rouge.*sort=delta.*|.*sort=delta.*metric=rouge.*"))
    first = page.locator("tr.matrix-row").first
    assert first.get_attribute("data-key") == "refund case 4"
    assert first.locator("td.cell").nth(2).locator(".score-delta.worse").inner_text() == "−0.72"
    screenshot(page, "compare-commit-order-metric-drop")

    # Search an output text: only the case whose response holds it is left.
    page.fill("input[name=q]", "lost in TRANSIT")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(re.compile(r".*q=lost.*"))
    assert page.locator("tr.matrix-row").count() == 1
    hit = page.locator("tr.matrix-row.has-hit")
    assert hit.get_attribute("data-key") == "refund case 5"
    assert hit.locator(".dot.hit").count() == 1

    # The side by side of the three runs at the turn that matched.
    hit.locator("a.hit-link").click()
    page.wait_for_url(re.compile(r".*/compare/case/.*#turn-1$"))
    section = page.locator("section#turn-1")
    assert section.locator(".run-column").count() == 3
    assert section.locator("mark").first.inner_text() == "LOST in transit"
    assert LOST in section.locator(f'.run-column[data-run="{data.middle.pk}"]').inner_text()
    assert page.locator("section.turn-across").count() == 3  # every turn of the case
    page.click("nav.turn-pick >> text=turn 2")
    page.wait_for_url(re.compile(r".*turn=1.*"))
    assert page.locator("section.turn-across").count() == 1
    metrics = page.locator("section#turn-2 table.metric-across")
    assert metrics.locator("thead th").count() == 2 + 3  # metric, kind, one per run
    screenshot(page, "compare-three-runs-side-by-side")


# --- the side by side of three runs at 1400 px (issue 27) ------------------------------------

REASONING = (
    "The net change in operating cash flow from 2008 to 2009 is 206588 minus 181001, that is "
    "25587; divided by the 2008 operating cash flow of 181001 it gives 14.14 %, which the "
    "response states, naming the operating activities behind it and the amounts it used."
)


def literal_arg(name: str, value: Any) -> dict[str, Any]:
    """An argument a literal matcher compared as the grader records it: its "normalised"
    values are the values themselves (nothing was normalised)."""
    return {
        "arg": name,
        "matcher": "literal",
        "expected": value,
        "actual": value,
        "actual_present": True,
        "expected_normalized": value,
        "actual_normalized": value,
        "passed": True,
        "reason": None,
    }


def convfinqa_like(runs: list[Run]) -> None:
    """Turn 1 of "refund case 0" in each run as a ConvFinQA turn reads: a calculator call
    with long numbers matched literally, and metrics whose judge wrote a paragraph."""
    from runs.models import MetricRow, TurnRow

    details = [
        {
            "tool": "calculator",
            "args_asserted": ["expression", "total"],
            "matched_call_index": 0,
            "closest_call_index": 0,
            "unmatched_reason": None,
            "passed": True,
            "count": 1,
            "matching_calls": [0],
            "args": [
                literal_arg("expression", "divide(subtract(206588, 181001), 181001)"),
                literal_arg("total", 1810.01),
            ],
        }
    ]
    turns = TurnRow.objects.filter(run__in=runs, case__name="refund case 0", index=0)
    turns.update(arg_match_details=details)
    MetricRow.objects.filter(turn__in=turns).update(
        reasoning=REASONING, model_used="gpt-4o-mini-2024-07-18", evaluation_time_ms=1810
    )


# In each run's column: the tables that scroll sideways, the texts of those tables broken
# inside a word or a number (a word's own box on more than one line) and the cells allowed to
# break words anywhere.
SIDE_MISFITS = """() => {
  const out = [];
  for (const box of document.querySelectorAll(".side .table-scroll")) {
    if (box.scrollWidth > box.clientWidth + 1)
      out.push(`${box.getAttribute("aria-label")}: ${box.scrollWidth} px in ${box.clientWidth} px`);
  }
  const cells = document.querySelectorAll(".side :is(table.diff, table.metrics) td");
  for (const cell of cells) {
    const style = getComputedStyle(cell);
    if (style.overflowWrap === "anywhere" || ["break-all", "break-word"].includes(style.wordBreak))
      out.push(`a cell may break words anywhere: ${cell.textContent.trim().slice(0, 40)}`);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const word of text.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(text, word.index);
        range.setEnd(text, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (lines.size > 1) out.push(`"${word[0]}" breaks over ${lines.size} lines`);
      }
    }
  }
  return out;
}"""


def test_three_runs_side_by_side_at_1400px_fit_their_tables_and_break_no_word_or_number(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from tests.compare.compare_data import three_runs
    from tests.web.factories import make_project

    page = browser_page
    data = three_runs(make_project())
    convfinqa_like([data.oldest, data.middle, data.newest])
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}/compare/case/?runs={data.ids}&key=refund+case+0&turn=0")
    section = page.locator("section#turn-1")
    assert section.locator(".run-column").count() == 3
    assert page.viewport_size["width"] == 1400
    misfits = page.evaluate(SIDE_MISFITS)
    assert misfits == [], "\n".join(misfits)
    # Numbers and names read whole: the long number is on one line in every run.
    totals = section.locator(".side table.diff td.mono", has_text="1810.01")
    assert totals.count() == 2 * 3  # expected and actual, in each run
    # Nothing was normalised: no normalised column, in any run.
    normalised = section.locator(".side table.diff th", has_text="normalised")
    assert [normalised.nth(i).is_visible() for i in range(normalised.count())] == [False] * (
        normalised.count()
    )
    assert section.locator(".side table.metrics th", has_text="Reasoning").first.is_visible()
    screenshot(page, "compare-three-runs-stacked", docs=True)
    # Two runs stay side by side, and their tables fit their half of the page just as well.
    pair = f"{data.oldest.pk},{data.newest.pk}"
    page.goto(f"{live_server.url}/compare/case/?runs={pair}&key=refund+case+0&turn=0")
    tops = page.locator("section#turn-1 .run-column").evaluate_all(
        "columns => columns.map(c => Math.round(c.getBoundingClientRect().top))"
    )
    assert len(tops) == 2 and tops[0] == tops[1]
    misfits = page.evaluate(SIDE_MISFITS)
    # In half the page a judge's model id may wrap at its hyphens; nothing else may.
    assert [m for m in misfits if "gpt-4o-mini-2024-07-18" not in m] == [], "\n".join(misfits)
    screenshot(page, "compare-two-runs-side-by-side")


def test_the_side_by_side_names_each_runs_regions_apart(
    chromium: Any, live_server: Any, transactional_db: None
) -> None:
    """axe's landmark-unique: the runs' columns each hold a turn's tables, each a region, and
    each region needs a name of its own."""
    from tests.compare.compare_data import three_runs
    from tests.web.factories import make_project
    from tests.web.test_browser_a11y import AXE

    if not AXE.exists():
        pytest.skip(f"{AXE} is absent (python3 dev.py setup installs it with npm ci)")
    data = three_runs(make_project())
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        login(page, live_server, make_user("reviewer"))
        for runs in (f"{data.oldest.pk},{data.newest.pk}", data.ids):
            # Turn 2 (index 1) differs, so every run's turn is open: each table is a region.
            page.goto(f"{live_server.url}/compare/case/?runs={runs}&key=refund+case+1&turn=1")
            page.add_script_tag(path=str(AXE))
            found = page.evaluate(
                """async () => (await axe.run(document, {runOnly: ["landmark-unique"]}))
                  .violations.flatMap(v => v.nodes.map(n => n.target.join(" ")))"""
            )
            assert found == [], (runs, found)
            labels = page.locator(".side [role=region]").evaluate_all(
                "boxes => boxes.map(box => box.getAttribute('aria-label'))"
            )
            assert labels and len(labels) == len(set(labels))
    finally:
        context.close()

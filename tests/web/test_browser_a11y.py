"""Every page in a real browser, checked by axe-core 4 (npm, tests/web/axe): no violation of
impact serious or critical (nor the named moderate and minor rules), at a desktop width and at a
390 px phone width, in the light and in the dark colour scheme (each page is checked in one, then
the other: ``prefers-color-scheme`` emulated, no second visit; a scheme changes the colours only,
so the dark pass runs the rules that read colours, ``COLOUR_RULES``); in the dark one the page's
background is dark; at both widths the page itself never scrolls sideways (wide tables scroll
inside regions of their own).

axe-core comes from ``tests/web/axe/node_modules`` (``python3 dev.py setup`` runs ``npm ci``
there); without it the test skips, which fails in CI (HOLODECK_REQUIRE_SERVICES). The pages'
Content-Security-Policy forbids inline scripts, so only this test's browser context bypasses it
(``bypass_csp``) to inject axe.

With ``HOLODECK_SCREENSHOTS=1`` the desktop pass saves the screenshots of docs/dashboard.md
into docs/images/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import pytest
from django.urls import Resolver404, resolve, reverse

from runs.core.sealing import snapshot_working_tree
from runs.models import AgentProject, CaseRow, MetricRow, Run
from runs.recorder import run_finish
from runs.services.launch import run_cancel
from runs.services.snapshots import snapshot_store
from runs.services.tokens import token_create
from tests.web.chromium import CHROMIUM
from tests.web.factories import (
    RunSpec,
    build_run,
    failing_case,
    make_errored,
    make_not_graded,
    make_stopped,
    make_user,
    repeated_run,
    running_case,
)
from tests.web.services_helpers import example_project
from tests.web.test_browser import expand_case, login
from tests.web.test_browser_phone_and_keyboard import BACKGROUND_LIGHTNESS

ROOT = Path(__file__).resolve().parents[2]
AXE = Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "docs" / "images"
# Fail on these impacts, and on these rules whatever their impact (issue 19 named them).
FAILING_IMPACTS = {"serious", "critical"}
FAILING_RULES = {"heading-order", "empty-table-header", "landmark-unique"}
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 1000}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

AXE_RUN = """async (only) => {
  const options = {resultTypes: ["violations"]};
  if (only) options.runOnly = {type: "rule", values: only};
  const result = await axe.run(document, options);
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    targets: v.nodes.slice(0, 5).map(n => n.target.join(" ")),
  }));
}"""
PAGE_WIDTHS = """() => {
  const page = document.scrollingElement, width = page.clientWidth;
  const clipped = el => {  // inside a box that scrolls or clips: it cannot widen the page
    for (let box = el.parentElement; box; box = box.parentElement)
      if (getComputedStyle(box).overflowX !== "visible") return true;
    return false;
  };
  const right = el => {  // its box, or its content where that overflows the box
    const box = el.getBoundingClientRect();
    return Math.max(box.right, box.left + el.scrollWidth);
  };
  const sticksOut = el => right(el) > width + 1 && !clipped(el);
  const boxSticksOut = el => el.getBoundingClientRect().right > width + 1 && !clipped(el);
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + [...el.classList].map(c => "." + c).join("");
  const all = [...document.querySelectorAll("body, body *")];
  // The culprits: the elements whose box sticks out of the window while their parent's does
  // not; else those whose content (text) sticks out while their parent's does not.
  let culprits = all.filter(el => boxSticksOut(el) && !boxSticksOut(el.parentElement));
  if (!culprits.length)
    culprits = all.filter(el => sticksOut(el) && el.parentElement && !sticksOut(el.parentElement));
  return {scroll: page.scrollWidth, client: width, culprits: culprits.slice(0, 8).map(name)};
}"""

# Side by side, each turn's tables fit their half of the page (no column cut off behind a
# scroll), and the names in them (metrics, tools, arguments) do not break mid-word.
SIDE_BY_SIDE_MISFITS = """() => {
  const out = [];
  for (const box of document.querySelectorAll(".side .table-scroll")) {
    const [wide, room] = [box.scrollWidth, box.clientWidth];
    if (wide > room + 1) out.push(`${box.getAttribute("aria-label")}: ${wide} px in ${room} px`);
  }
  const names = ".side :is(table.metrics, table.tools, table.diff) td:nth-child(2)";
  for (const cell of document.querySelectorAll(names)) {
    const text = cell.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE || !text.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(text);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (lines.size > 1) out.push(`"${text.textContent.trim()}" breaks over ${lines.size} lines`);
  }
  return out;
}"""


@dataclass(frozen=True)
class Dataset:
    """Runs that hold every outcome a page draws (issue 27): passed, failed, not graded,
    errored, cancelled (stopping, stopped, not run), repeated (flaky), re-graded, imported."""

    project: AgentProject
    before: Run
    after: Run
    stopping: Run  # cancelled while case 2 ran: that case still running, one turn written
    mixed: Run  # case 0 not graded, 1 failed, 2 errored, the rest passed
    stopped: Run  # cancelled: case 2 stopped (2 turns written, 2 skipped), case 3 not run
    repeated: Run  # 3 cases × 3 repetitions: one always passes, one is flaky, one always fails
    repeated_again: Run  # the same cases later, for compare of two repeated runs
    regrade: Run  # a re-grade of ``after``
    imported: Run  # from a result file


@pytest.fixture
def dataset(transactional_db: None, tmp_path: Path) -> Dataset:
    """A registered example project (a real agent.yaml and files), two finished runs of it with
    snapshots that differ in the prompt, the later one with more failing cases; a run of every
    other outcome; an API token."""
    project = example_project(tmp_path)
    directory = Path(project.directory)
    first = snapshot_store(packed=snapshot_working_tree(directory))
    prompt = directory / "prompts" / "system.md"
    prompt.write_text(prompt.read_text() + "\nAnswer in one sentence.\n")
    second = snapshot_store(packed=snapshot_working_tree(directory))
    before = build_run(
        project, RunSpec(cases=6, turns=3, failing=(1,), transcripts=True), snapshot=first
    )
    after = build_run(
        project,
        RunSpec(
            cases=6,
            turns=3,
            failing=(1, 3, 4),
            git_commit="9" * 40,
            transcripts=True,
            texts={"system_prompt": "You are the refund assistant.\nAnswer in one sentence."},
        ),
        snapshot=second,
    )
    for index in range(6):  # one name per case in both runs, so compare pairs them
        CaseRow.objects.filter(run__in=[before, after], index=index).update(
            name=f"refund case {index}"
        )
    stopping = build_run(project, RunSpec(cases=4, turns=3, status=Run.Status.RUNNING, done=2))
    running_case(stopping, 2, written=1)
    run_cancel(run=Run.objects.get(pk=stopping.pk))
    mixed = build_run(project, RunSpec(cases=5, turns=3, failing=(1,)))
    make_not_graded(mixed, 0)
    make_errored(mixed, 2)
    # ConvFinQA's metric names, long enough to widen the metric summary at 390 px
    MetricRow.objects.filter(run=mixed, metric_name="refund_grader").update(
        metric_name="program_equivalence"
    )
    run_finish(mixed.pk)
    stopped = build_run(project, RunSpec(cases=4, turns=4, status=Run.Status.RUNNING, done=2))
    make_stopped(stopped, 2, written=2)
    chances = [1.0, 0.5, 0.0]
    repeated = repeated_run(project, chances, repeats=3, seed=1, exact=True, minutes=-2)
    repeated_again = repeated_run(project, chances, repeats=3, seed=2, exact=True, minutes=-1)
    # The re-grade is the project's latest run: the home page shows it.
    imported = build_run(
        project, RunSpec(cases=3, turns=1, failing=(2,), git_commit=""), source=Run.Source.IMPORT
    )
    regrade = build_run(
        project,
        RunSpec(cases=6, turns=3, failing=(1, 3), git_commit=after.git_commit),
        source=Run.Source.REGRADE,
        regrade_of=after,
        regrade_sources={
            "of": after.pk,
            "transcripts": {"run": after.pk, "commit": after.git_commit, "branch": "main"},
            "grading": {"ref": "main", "commit": "8" * 40, "branch": "main"},
        },
    )
    return Dataset(
        project,
        before,
        after,
        stopping,
        mixed,
        stopped,
        repeated,
        repeated_again,
        regrade,
        imported,
    )


# What a colour scheme can change: the colours only (app.css's custom properties), so the second
# scheme's pass runs the rules that read colours; the first runs every rule.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


def axe_problems(page: Any, only: list[str] | None = None) -> list[str]:
    """The failing violations on the page (``only``: of these rules), one line each: rule,
    impact, help, nodes. axe comes with the page (the context's init script), else is added."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['targets']}"
        for v in page.evaluate(AXE_RUN, only)
        if v["impact"] in FAILING_IMPACTS or v["id"] in FAILING_RULES
    ]


def dark_problems(page: Any) -> list[str]:
    """The page's failing violations in the dark colour scheme, and a background that is not
    dark (on the pages app.css styles: the API docs are Swagger UI's own, light in both)."""
    page.emulate_media(color_scheme="dark")
    try:
        found = axe_problems(page, COLOUR_RULES)
        ours = page.locator("link[href$='css/app.css']").count()
        lightness = page.evaluate(BACKGROUND_LIGHTNESS)
        if ours and lightness > 0.2:
            found.append(f"the background is not dark: lightness {lightness:.2f}")
    finally:
        page.emulate_media(color_scheme="light")
    return [f"dark: {line}" for line in found]


def sideways_scroll(page: Any) -> str | None:
    """What widens the page past the window (``scrollWidth`` > the window's width), if any."""
    widths = page.evaluate(PAGE_WIDTHS)
    if widths["scroll"] > min(widths["client"], page.viewport_size["width"]):
        return (
            f"the page is {widths['scroll']} px wide in a {widths['client']} px window:"
            f" {', '.join(widths['culprits'])} stick out"
        )
    return None


def project_page(project: AgentProject) -> str | None:
    """/projects/<id>/ where that page exists (issue 19 adds it)."""
    url = f"/projects/{project.pk}/"
    try:
        resolve(url)
    except Resolver404:
        return None
    return url


def run_url(run: Run) -> str:
    return reverse("run_detail", args=[run.pk])


def case_url(run: Run, *, index: int) -> str:
    case = run.cases.filter(index=index).order_by("repetition").first()
    assert case is not None
    return reverse("case_detail", args=[run.pk, case.pk])


def visits(data: Dataset) -> list[tuple[str, str | Callable[[Any], None]]]:
    """(name, URL path or an action on the open page) of every page, in order. The actions start
    from the page before them."""
    before, after = data.before, data.after
    case = failing_case(after)

    def expand(page: Any) -> None:
        expand_case(page, case.pk)

    def expand_another(page: Any) -> None:  # two cases' turn blocks: their regions' names
        expand_case(page, after.cases.get(index=3).pk)

    def stopping(page: Any) -> None:
        page.goto(urljoin(page.url, reverse("run_detail", args=[data.stopping.pk])))
        expand_case(page, data.stopping.cases.get(index=2).pk)

    def stopped(page: Any) -> None:
        page.goto(urljoin(page.url, run_url(data.stopped)))
        expand_case(page, data.stopped.cases.get(index=2).pk)

    def side_by_side(page: Any) -> None:
        page.locator("tr.has-regression").first.locator("td.cell a.cv-failed").click()
        page.wait_for_url(re.compile(r".*/compare/case/.*"))

    def transcripts(page: Any) -> None:  # from the case page: all its turns' opened, searched
        page.get_by_label("Search the transcripts of every turn").fill("refund")
        for number in (1, 2):  # the case's search opened, loaded and searched each sent turn's
            page.locator(f"#turn-{number}-transcript mark.tx-hit").first.wait_for()
        page.locator("[data-tx-case-status]", has_text="(in 2 turns)").wait_for()
        page.get_by_label("Only matching events").first.check()

    def api_docs(page: Any) -> None:
        page.goto(urljoin(page.url, "/api/v1/docs"))
        page.locator(".opblock").first.wait_for()  # Swagger UI has drawn the operations

    def config_diff(page: Any) -> None:
        page.click("text=config diff")
        page.wait_for_url(re.compile(r".*/compare/config/.*"))

    pair = [run.cases.get(index=3).pk for run in (before, after)]  # passed, then failed
    transcript_pair = f"{reverse('compare_transcript')}?a={pair[0]}&b={pair[1]}&turn=1"
    three = f"{before.pk},{after.pk},{data.stopping.pk}"
    compare_three = urlencode(
        {"runs": three, "order": "commits", "metric": "rouge", "sort": "delta", "q": "refund"}
    )
    side_three = urlencode({"runs": three, "key": "refund case 0", "order": "commits", "q": "0-1"})

    pages: list[tuple[str, str | Callable[[Any], None]]] = [
        ("projects", reverse("home")),
        ("runs", reverse("run_list")),
        ("run", reverse("run_detail", args=[after.pk])),
        ("run with a case expanded", expand),
        ("run with two cases expanded", expand_another),
        ("case", reverse("case_detail", args=[after.pk, case.pk])),
        ("the case's transcripts, opened", transcripts),
        ("run filtered: tool assertions failed, a text", f"{run_url(after)}?tools=failed&text=3-1"),
        ("run filtered: untriaged failures", f"{run_url(after)}?review=untriaged"),
        ("review queue", reverse("review_queue", args=[data.project.pk])),
        ("a stopping run with its running case open", stopping),
        ("a run with cases not graded and errored", run_url(data.mixed)),
        ("its not-graded case", case_url(data.mixed, index=0)),
        ("its errored case", case_url(data.mixed, index=2)),
        ("a cancelled run with its stopped case open", stopped),
        ("the stopped case", case_url(data.stopped, index=2)),
        ("a repeated run", run_url(data.repeated)),
        ("a flaky repeated case", case_url(data.repeated, index=1)),
        ("a re-grade", run_url(data.regrade)),
        ("an imported run", run_url(data.imported)),
        ("compare", f"{reverse('compare')}?runs={before.pk},{after.pk}"),
        ("side by side", side_by_side),
        ("config diff", config_diff),
        (
            "compare of 3 runs in commit order, by rouge's drop, searched",
            f"/compare/?{compare_three}",
        ),
        ("side by side of 3 runs", f"/compare/case/?{side_three}"),
        ("two runs' transcripts of a turn side by side", transcript_pair),
        (
            "compare of two repeated runs",
            f"{reverse('compare')}?runs={data.repeated.pk},{data.repeated_again.pk}",
        ),
        (
            "compare of a run and its re-grade",
            f"{reverse('compare')}?runs={after.pk},{data.regrade.pk}",
        ),
        ("trends", f"{reverse('trends')}?project={data.project.pk}"),
        ("tokens", reverse("tokens")),
        ("import", reverse("import_results")),
        ("launch", reverse("project_launch", args=[data.project.pk])),
        ("roles and categories", reverse("project_roles", args=[data.project.pk])),
        ("audit log", reverse("audit")),
        ("judges checked against people", reverse("project_calibration", args=[data.project.pk])),
        (
            "a metric against people",
            reverse("project_calibration_metric", args=[data.project.pk, "rouge"]),
        ),
        ("what ran", reverse("run_snapshot", args=[after.pk])),
        ("a file that ran", reverse("run_snapshot_file", args=[after.pk, "agent.yaml"])),
        ("API docs", api_docs),
    ]
    project = project_page(data.project)
    if project is not None:
        pages.insert(1, ("project", project))
    return pages


def check_every_page(
    context: Any, live_server: Any, data: Dataset, screenshots: bool
) -> dict[str, list[str]]:
    """{page: its problems} of every page that has any."""
    problems: dict[str, list[str]] = {}
    page = context.new_page()

    def check(name: str) -> None:
        page.wait_for_load_state()  # "load"; the visits wait for what they open or fetch
        found = axe_problems(page) + dark_problems(page)
        scroll = sideways_scroll(page)
        if scroll:
            found.append(scroll)
        if name == "side by side" and page.viewport_size == DESKTOP:
            found.extend(page.evaluate(SIDE_BY_SIDE_MISFITS))
        if found:
            problems[name] = found

    page.goto(f"{live_server.url}{reverse('login')}")
    check("login")
    staff = make_user("lead", staff=True)
    token_create(user=staff, name="ci gate")
    login(page, live_server, staff)
    for name, visit in visits(data):
        if isinstance(visit, str):
            response = page.goto(f"{live_server.url}{visit}")
            assert response is not None and response.ok, f"{name}: {visit} answered {response}"
        else:
            visit(page)
        check(name)
        if screenshots and name in ("run with a case expanded", "compare"):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = "run-case-expanded" if name.startswith("run") else "compare"
            page.screenshot(path=str(SCREENSHOTS / f"{shot}.png"), full_page=True)
    return problems


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "390px"])
def test_every_page_has_no_serious_axe_violation_and_no_sideways_scroll(
    chromium: Any, live_server: Any, dataset: Dataset, viewport: dict[str, int]
) -> None:
    if not AXE.exists():
        pytest.skip(f"{AXE} is absent (python3 dev.py setup installs it with npm ci)")
    context = chromium.new_context(viewport=viewport, bypass_csp=True, color_scheme="light")
    context.set_default_timeout(10_000)
    # axe in every page the context opens, before the page's own scripts: sent to the browser
    # once, not injected page by page (82 injections of its 0.5 MB took 5 s a pass).
    context.add_init_script(path=str(AXE))
    screenshots = viewport == DESKTOP and os.environ.get("HOLODECK_SCREENSHOTS") == "1"
    try:
        problems = check_every_page(context, live_server, dataset, screenshots)
    finally:
        context.close()
    report = "\n".join(
        f"{name}:\n" + "\n".join(f"  {line}" for line in lines) for name, lines in problems.items()
    )
    assert not problems, f"at {viewport['width']} px:\n{report}"

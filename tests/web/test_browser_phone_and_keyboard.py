"""Rough edges at a 390 px phone width and on the keyboard (issue 38, item 9), in Chromium: the
trends chart's labels stay readable, an argument table's every column can be read, a skip link
leads past the header, a key moves to the next failed case, the dark scheme is dark, and three
runs side by side sit in three columns on a wide screen."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import AgentProject, Run, TurnRow
from tests.web.chromium import CHROMIUM
from tests.web.factories import RunSpec, build_run, failing_case, make_project, make_user
from tests.web.test_browser import expand_case, login

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 1000}


@pytest.fixture
def open_page(chromium: Any) -> Iterator[Any]:
    """A function that opens a fresh page at a viewport (and a colour scheme) in a browser
    context of its own; every context is closed at the end."""
    contexts: list[Any] = []

    def page_at(viewport: dict[str, int], color_scheme: str = "light") -> Any:
        context = chromium.new_context(viewport=viewport, color_scheme=color_scheme)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    try:
        yield page_at
    finally:
        for context in contexts:
            context.close()


def logged_in(page: Any, live_server: Any) -> Any:
    login(page, live_server, make_user("reviewer", staff=True))
    return page


# --- the trends chart at 390 px ----------------------------------------------------------

# Each axis label's rendered font size: its font size in the chart's own units times the scale
# the chart is drawn at (its width on the page over its viewBox's width).
AXIS_LABEL_SIZES = """() => {
  const svg = document.querySelector("svg.trend-chart");
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return [...svg.querySelectorAll("text.trend-axis")].map(
    text => parseFloat(getComputedStyle(text).fontSize) * scale);
}"""


def trend_runs(project: AgentProject, count: int) -> list[Run]:
    start = timezone.now() - timedelta(hours=count)
    return [
        build_run(
            project,
            RunSpec(cases=4, turns=1, failing=tuple(range(n % 3)), git_commit=f"{n:x}" * 40),
            created_at=start + timedelta(hours=n),
        )
        for n in range(count)
    ]


def test_the_trends_charts_axis_labels_stay_at_least_10px_on_a_390px_phone(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    project = make_project()
    trend_runs(project, 12)
    page = logged_in(open_page(PHONE), live_server)
    page.goto(f"{live_server.url}{reverse('trends')}?project={project.pk}")
    sizes = page.evaluate(AXIS_LABEL_SIZES)
    assert sizes and min(sizes) >= 10, f"axis labels drawn at {min(sizes):.1f} px"
    # The chart scrolls in a region of its own: the page itself does not scroll sideways.
    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    region = page.get_by_role("region", name="The trends chart")
    assert region.evaluate("box => box.scrollWidth > box.clientWidth")


# --- argument tables at 390 px -----------------------------------------------------------

LONG_ACTUAL = "refund for order A-20240917-0042, 3 items, shipped to the warehouse in Leipzig"
LONG_REASON = (
    "the actual value is not within the fuzzy threshold of the expected one: the order number"
    " differs and the text around it names another warehouse"
)

# Of every argument table on the page: the tables wider than their box (their last columns out of
# sight until scrolled to), and the cells whose text is cut off (wider than the cell) or out of
# the window.
ARG_TABLE_MISFITS = """() => {
  const out = [];
  for (const table of document.querySelectorAll("table.diff")) {
    if (!table.getClientRects().length) continue;  // in a closed row
    const box = table.closest(".table-scroll");
    if (box.scrollWidth > box.clientWidth + 1)
      out.push(`the table is ${box.scrollWidth} px wide in ${box.clientWidth} px`);
    for (const cell of table.querySelectorAll("td")) {
      if (!cell.getClientRects().length || !cell.textContent.trim()) continue;
      const text = `"${cell.textContent.trim().slice(0, 30)}"`;
      if (cell.scrollWidth > cell.clientWidth + 1)
        out.push(`${text} is cut off: ${cell.scrollWidth} px in ${cell.clientWidth} px`);
      if (cell.getBoundingClientRect().right > innerWidth + 1)
        out.push(`${text} ends out of the window`);
    }
  }
  return out;
}"""


def failing_arguments(run: Run) -> TurnRow:
    """The failing case's failed turn, its tool assertion given a long actual value and reason."""
    turn = TurnRow.objects.get(case=failing_case(run), index=1)
    details = turn.arg_match_details
    assert details is not None
    argument = details[0]["args"][0]
    argument.update(actual=LONG_ACTUAL, actual_normalized=LONG_ACTUAL.lower(), reason=LONG_REASON)
    TurnRow.objects.filter(pk=turn.pk).update(arg_match_details=details)
    return turn


def test_an_argument_tables_every_column_can_be_read_at_390px(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    run = build_run(make_project(), RunSpec(cases=3, turns=3, failing=(1,)))
    turn = failing_arguments(run)
    page = logged_in(open_page(PHONE), live_server)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}")
    expand_case(page, turn.case_id)
    assert page.locator("table.diff").first.is_visible()
    assert page.evaluate(ARG_TABLE_MISFITS) == []
    assert page.get_by_text(LONG_REASON).is_visible()
    page.goto(f"{live_server.url}{reverse('case_detail', args=[run.pk, turn.case_id])}")
    assert page.locator("table.diff").first.is_visible()
    assert page.evaluate(ARG_TABLE_MISFITS) == []
    assert page.get_by_text(LONG_REASON).is_visible()


# --- the keyboard: a skip link, and keys for the failed cases -----------------------------

FOCUSED = """() => {
  const el = document.activeElement;
  const box = el.getBoundingClientRect();
  return {
    tag: el.tagName.toLowerCase(), id: el.id, text: el.textContent.trim().slice(0, 60),
    row: el.closest("details.case") ? el.closest("details.case").id : null,
    seen: box.width > 1 && box.height > 1 && box.top >= 0 && box.bottom <= innerHeight,
  };
}"""


def focused(page: Any) -> dict[str, Any]:
    return page.evaluate(FOCUSED)  # type: ignore[no-any-return]


def run_with_failures(cases: int = 30, failing: tuple[int, ...] = (3, 17, 25)) -> Run:
    return build_run(make_project(), RunSpec(cases=cases, turns=2, failing=failing))


def test_the_first_tab_shows_a_skip_link_that_moves_focus_past_the_header(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    run = run_with_failures()
    page = logged_in(open_page(DESKTOP), live_server)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}")
    page.keyboard.press("Tab")
    first = focused(page)
    assert (first["text"], first["seen"]) == ("Skip to content", True)
    page.keyboard.press("Enter")
    assert focused(page)["id"] == "content"  # <main>'s content: the next Tab is its first link
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('header.topbar')") is None
    # On a run page a second skip link leads to the cases: Enter focuses the first case's row.
    page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    second = focused(page)
    assert (second["text"], second["seen"]) == ("Skip to the cases", True)
    page.keyboard.press("Enter")
    row = run.cases.get(index=0)
    assert focused(page)["row"] == f"case-{row.pk}"
    page.keyboard.press("Enter")  # and opens it
    page.locator(f"#case-{row.pk} section.turn").first.wait_for()


def test_j_and_k_move_focus_to_the_next_and_previous_failed_case_but_not_while_typing(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    run = run_with_failures()
    failed = [f"case-{run.cases.get(index=i).pk}" for i in (3, 17, 25)]
    page = logged_in(open_page(DESKTOP), live_server)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}")
    hint = page.locator(".key-hint")
    assert hint.is_visible() and "next failed case" in hint.inner_text()
    seen = []
    for _ in failed:
        page.keyboard.press("j")
        where = focused(page)
        seen.append(where["row"])
        assert where["tag"] == "summary" and where["seen"], where
    assert seen == failed
    page.keyboard.press("j")  # at the last failure: it stays there
    assert focused(page)["row"] == failed[-1]
    page.keyboard.press("k")
    assert focused(page)["row"] == failed[1]
    # Typing a j or a k in the search box types it.
    page.locator("#case-q").focus()
    page.keyboard.type("jk")
    assert page.locator("#case-q").input_value() == "jk"
    assert focused(page)["id"] == "case-q"


# --- three runs side by side at 1400 px --------------------------------------------------


def test_three_runs_side_by_side_sit_in_three_columns_at_1400px_and_stack_at_390px(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    from tests.compare.compare_data import three_runs

    data = three_runs(make_project())
    url = f"{live_server.url}/compare/case/?runs={data.ids}&key=refund+case+1"
    boxes = "columns => columns.map(c => c.getBoundingClientRect().toJSON())"
    columns = "section.turn-across >> nth=0 >> .run-column"
    page = logged_in(open_page(DESKTOP), live_server)
    page.goto(url)
    page.locator("details.sides").first.evaluate("sides => { sides.open = true; }")
    wide = page.locator(columns).evaluate_all(boxes)
    assert len(wide) == 3
    assert len({round(box["top"]) for box in wide}) == 1, wide
    assert wide[0]["right"] <= wide[1]["left"] and wide[1]["right"] <= wide[2]["left"], wide
    region = page.locator(".runs-scroll").first  # all three in sight, none behind a scroll
    assert region.evaluate("box => box.scrollWidth <= box.clientWidth")
    page.set_viewport_size(PHONE)
    narrow = page.locator(columns).evaluate_all(boxes)
    assert narrow[0]["bottom"] <= narrow[1]["top"] and narrow[1]["bottom"] <= narrow[2]["top"]


# --- the dark scheme ---------------------------------------------------------------------

BACKGROUND_LIGHTNESS = """() => {
  const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}"""


def test_a_browser_that_prefers_dark_gets_dark_pages(
    live_server: Any, open_page: Any, transactional_db: None
) -> None:
    run = run_with_failures(cases=3, failing=(1,))
    user = make_user("reviewer")
    for scheme in ("dark", "light"):
        page = open_page(DESKTOP, scheme)
        login(page, live_server, user)
        page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}")
        lightness = page.evaluate(BACKGROUND_LIGHTNESS)
        assert (lightness < 0.2) if scheme == "dark" else (lightness > 0.8), (scheme, lightness)

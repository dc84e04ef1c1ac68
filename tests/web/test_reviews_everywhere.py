"""Reviews everywhere a run is read (issue 39, part 5): the JSON export carries them where
HoloDeck readers never look and an import keeps them; the compare CSV has their columns; compare
marks a triaged regression; trends count a run's triaged failures."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs import selectors
from runs.core.comparison.csv_export import REVIEW_COLUMNS
from runs.core.wire.holodeck_io import ReportFormatError, dump_eval_run, load_eval_runs
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.review_models import AuditEntry, Review, ReviewChange, TriageCategory
from runs.services import history
from runs.services.reviews import ReviewInput, category_save, review_save
from tests.web.factories import RunSpec, build_run, make_project

pytestmark = pytest.mark.django_db


def failing_turn(run: Run) -> TurnRow:
    turn = TurnRow.objects.filter(run=run, outcome="failed").order_by("case__index").first()
    assert turn is not None
    return turn


def reviewed_run(project: AgentProject, user: User) -> tuple[Run, TurnRow]:
    """A run whose failing turn is triaged "ground truth wrong" (with a note and a link) and
    whose failing case has a review of its own, in a category of the project's making."""
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    review_save(
        user=user, case=turn.case, turn=turn,
        data=ReviewInput(verdict="should_pass", category="ground truth wrong",
                         note="the order is **A-123**", link="https://issues.example/7"),
    )  # fmt: skip
    category_save(user=user, project_id=project.pk, name="needs a product call")
    review_save(
        user=user, case=turn.case, turn=None,
        data=ReviewInput(verdict="agrees", category="needs a product call"),
    )  # fmt: skip
    return run, turn


# --- the JSON export and the import -------------------------------------------------------------


def test_the_export_carries_the_reviews_and_a_holodeck_shaped_file_does_not(
    project: AgentProject, staff: User
) -> None:
    run, turn = reviewed_run(project, staff)
    report = json.loads(dump_eval_run(selectors.run_eval_run(run=run)))["report"]
    case_review, turn_review = report["reviews"]
    assert turn_review["result_index"] == 1 and turn_review["turn_index"] == 1
    assert turn_review["test_name"] == turn.case.name and turn_review["repetition"] == 0
    assert turn_review["turn_key"] == turn.turn_key and turn_review["failure"] == turn.failure
    assert turn_review["definition"] == turn.definition
    assert turn_review["verdict"] == "should_pass"
    assert turn_review["category"] == "ground truth wrong"
    assert turn_review["note"] == "the order is **A-123**"
    assert turn_review["link"] == "https://issues.example/7"
    assert turn_review["by"] == staff.username and turn_review["at"]
    assert case_review["turn_index"] is None and case_review["category"] == "needs a product call"
    holodeck = json.loads(dump_eval_run(selectors.run_eval_run(run=run), holodeck=True))
    assert "reviews" not in holodeck["report"]


def test_an_exported_run_imported_into_another_project_keeps_its_reviews(
    project: AgentProject, staff: User, viewer: User
) -> None:
    run, turn = reviewed_run(project, staff)
    text = dump_eval_run(selectors.run_eval_run(run=run))
    run.delete()  # the file names its run: imported where it still is, it is recognised
    elsewhere = make_project("weather-agent copy", "/srv/agents/copy")
    (eval_run,) = load_eval_runs(json.loads(text))
    imported = history.run_import(eval_run=eval_run, project=elsewhere, user=viewer)

    reviews = {r.turn.index if r.turn else None: r for r in Review.objects.filter(run=imported)}
    assert set(reviews) == {1, None}
    again = reviews[1]
    assert again.turn is not None and again.turn.case.name == turn.case.name
    assert (again.turn_key, again.definition, again.failure) == (
        turn.turn_key, turn.definition, turn.failure,
    )  # fmt: skip
    assert again.verdict == "should_pass" and again.note == "the order is **A-123**"
    assert again.category is not None and again.category.project_id == elsewhere.pk
    assert again.category.name == "ground truth wrong"
    assert again.link == "https://issues.example/7" and again.project_id == elsewhere.pk
    # Who made it is the file's word, kept on its first change; never a user of this name.
    assert again.created_by is None and again.updated_by is None
    (change,) = ReviewChange.objects.filter(review=again)
    assert change.after["imported_by"] == staff.username and change.by == viewer
    # The category the project lacked is added to it; one audit entry for the import.
    assert TriageCategory.objects.filter(project=elsewhere, name="needs a product call").exists()
    entry = AuditEntry.objects.get(action="review.import")
    assert (entry.username, entry.object_id, entry.project_id) == (
        viewer.username, imported.pk, elsewhere.pk,
    )  # fmt: skip
    assert entry.after == {"reviews": 2, "categories_added": ["needs a product call"]}
    # And it exports again as it came, its author included.
    exported = json.loads(dump_eval_run(selectors.run_eval_run(run=imported)))["report"]
    assert [r["by"] for r in exported["reviews"]] == [staff.username, staff.username]
    assert [r["category"] for r in exported["reviews"]] == [
        "needs a product call", "ground truth wrong",
    ]  # fmt: skip


def test_an_import_without_a_project_keeps_no_reviews_and_says_so(
    project: AgentProject, staff: User
) -> None:
    run, _ = reviewed_run(project, staff)
    text = dump_eval_run(selectors.run_eval_run(run=run))
    run.delete()
    (eval_run,) = load_eval_runs(json.loads(text))
    imported = history.run_import(eval_run=eval_run)
    assert not Review.objects.filter(run=imported).exists()
    assert not AuditEntry.objects.filter(action="review.import").exists()
    (warning,) = imported.run_options.warnings
    assert "2 reviews were not kept" in warning


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"result_index": 9}, "result_index 9 is no result's"),
        ({"turn_index": 5}, "has no turn_index 5"),
        ({"link": "javascript:alert(1)"}, "starts with http:// or https://"),
        ({"verdict": "maybe"}, "verdict"),
    ],
)
def test_a_file_with_a_review_of_nothing_it_holds_is_refused_whole(
    project: AgentProject, staff: User, tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    run, _ = reviewed_run(project, staff)
    document = json.loads(dump_eval_run(selectors.run_eval_run(run=run)))
    document["report"]["reviews"][1].update(change)
    with pytest.raises(ReportFormatError) as refused:
        load_eval_runs(document)
    assert problem in str(refused.value)


# --- the compare CSV ------------------------------------------------------------------------------


def csv_rows(client: Client, *runs: Run) -> list[dict[str, str]]:
    url = reverse("compare_csv")
    response: Any = client.get(url, {"runs": ",".join(str(run.pk) for run in runs)})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_compare_csv_has_each_case_and_runs_reviews(
    viewer_client: Client, project: AgentProject, staff: User
) -> None:
    base = build_run(project, RunSpec(cases=3, turns=2, failing=()))
    run, _ = reviewed_run(project, staff)
    rows = {(row["run_id"], row["case_index"]): row for row in csv_rows(viewer_client, base, run)}
    row = rows[(str(run.pk), "1")]
    assert row["reviewed"] == "case; turn 2"
    assert row["human_verdicts"] == "agrees; should_pass"
    assert row["review_categories"] == "needs a product call; ground truth wrong"
    assert row["review_notes"] == "turn 2: the order is **A-123**"
    untouched = rows[(str(base.pk), "1")]
    assert [untouched[c] for c in REVIEW_COLUMNS] == ["", "", "", ""]


def test_the_review_cells_are_guarded_against_formulas(
    viewer_client: Client, project: AgentProject, staff: User
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=(1,)))
    turn = TurnRow.objects.select_related("case").get(run=run, outcome="error")
    category_save(user=staff, project_id=project.pk, name="=HYPERLINK(1)")
    review_save(user=staff, case=turn.case, turn=turn,
                data=ReviewInput(verdict="unsure", category="=HYPERLINK(1)"))  # fmt: skip
    (row,) = [row for row in csv_rows(viewer_client, run) if row["case_index"] == "1"]
    assert row["review_categories"] == "'=HYPERLINK(1)"


# --- compare and trends -------------------------------------------------------------------------


def side_by_side(client: Client, *runs: Run, key: str) -> str:
    query = {"runs": ",".join(str(run.pk) for run in runs), "key": key}
    response = client.get(reverse("compare_case"), query)
    assert response.status_code == 200
    return response.text


def test_the_side_by_side_marks_a_triaged_regression_with_its_review(
    viewer_client: Client, project: AgentProject, staff: User
) -> None:
    base = build_run(project, RunSpec(cases=3, turns=2, failing=()))
    run, turn = reviewed_run(project, staff)
    CaseRow.objects.filter(pk=turn.case_id).update(name="refund case 1")  # one key in both
    html = side_by_side(viewer_client, base, run, key="refund case 1")
    assert html.count('class="small triage-mark"') == 1
    assert "triaged: ground truth wrong</span> by operator" in html
    assert "the order is **A-123**" in html  # the note, as text


def test_the_side_by_side_marks_a_known_review_carried_from_an_earlier_run(
    viewer_client: Client, project: AgentProject, staff: User
) -> None:
    earlier, _ = reviewed_run(project, staff)
    later = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    html = side_by_side(viewer_client, earlier, later, key="failing refund case 1")
    # The earlier run's own review, and the same review carried to the later run as known.
    assert html.count('class="small triage-mark"') == 2
    assert f'on run <a href="/runs/{earlier.pk}/">#{earlier.pk}</a> (known' in html


def test_trends_count_each_runs_triaged_failures(
    viewer_client: Client, project: AgentProject, staff: User
) -> None:
    build_run(project, RunSpec(cases=3, turns=2, failing=()))
    reviewed_run(project, staff)
    untouched = build_run(project, RunSpec(cases=3, turns=3, failing=(0, 2)))
    html = viewer_client.get(reverse("trends"), {"project": project.pk}).text
    assert "reviewed: 1 of 1 failure triaged" in html
    assert "reviewed: 0 of 2 failures triaged" in html
    assert html.count("no failures") == 1
    assert f'href="/runs/{untouched.pk}/?review=untriaged"' in html


def test_an_upload_of_reviews_on_the_page_or_the_api_is_audited_as_its_uploader(
    project: AgentProject, staff: User, staff_client: Client
) -> None:
    from runs.services.tokens import token_create
    from tests.web.test_import import api_import, import_page, upload

    texts = []
    for other in ("a", "b"):  # two runs: an import of a run already here adds nothing
        run, _ = reviewed_run(make_project(f"weather-agent {other}", f"/srv/{other}"), staff)
        texts.append(dump_eval_run(selectors.run_eval_run(run=run)))
        run.delete()
    page = import_page(staff_client, upload("a.json", texts[0]), project=project)
    assert page.status_code == 200
    _, secret = token_create(user=staff, name="ci")
    headers = {"Authorization": f"Bearer {secret}"}
    answer = api_import(Client(), headers, upload("b.json", texts[1]), project=project.pk)
    assert answer.status_code == 200, answer.content
    entries = AuditEntry.objects.filter(action="review.import").order_by("id")
    assert [(e.username, e.project_id) for e in entries] == [(staff.username, project.pk)] * 2

"""Reviews on the pages (issue 39, parts 1–3): the review panel of a failing turn and of a case
(the machine's verdict and the person's side by side, the form for reviewers only, every change
under it), the posts that write them (400 at the field, 403 with what is missing, CSRF), a
review carried from an earlier run (known: confirm or reopen; another failure; stale), the run
page's review tile and filters, and the review queue (its runs, its progress, triage, confirm,
assignment, a fixed number of queries and ≤ 100 ms at 1,000 failures)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.review_models import AuditEntry, Review
from runs.services.reviews import ReviewInput, review_assign, review_save, role_set
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.test_reviews import failing_turn, later_run, reviewed

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
AssertQueries = Callable[[int], AbstractContextManager[object]]


def case_url(turn: TurnRow) -> str:
    return reverse("case_detail", args=[turn.run_id, turn.case_id])


def review_url(turn: TurnRow, action: str = "turn_review") -> str:
    return reverse(action, args=[turn.run_id, turn.case_id, turn.pk])


def reviewer(project: AgentProject, name: str = "rita") -> User:
    user = make_user(name)
    role_set(by=None, project_id=project.pk, user_id=user.pk, role="reviewer")
    return user


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the panel ------------------------------------------------------------------------------


def test_a_failing_turn_shows_the_machines_verdict_and_the_review_form_side_by_side(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    page = signed_in(reviewer(project)).get(case_url(turn)).content.decode()
    assert page.count('class="review-panel') == 2  # the failing turn's, and the case's own
    assert f'id="review-turn-{turn.pk}"' in page
    assert "not reviewed yet" in page and "a review never changes it" in page
    assert f'hx-post="{review_url(turn)}"' in page
    for category in ("agent bug", "ground truth wrong", "grader wrong", "accepted"):
        assert f'<option value="{category}">' in page
    passing = TurnRow.objects.get(case_id=turn.case_id, index=0)
    assert f'id="review-turn-{passing.pk}"' not in page


def test_an_expanded_row_on_the_run_page_carries_the_panel_too(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    fragment = client.get(reverse("case_turns", args=[run.pk, turn.case_id])).content.decode()
    assert f'id="review-turn-{turn.pk}"' in fragment
    assert "js/reviews.js" in fragment


def test_a_viewer_reads_the_panel_and_a_post_of_theirs_is_a_403_that_writes_nothing(
    project: AgentProject, staff: User
) -> None:
    _, turn, _ = reviewed(project, staff, note="the **refund** tool")
    viewer = signed_in(make_user("val"))
    page = viewer.get(case_url(turn)).content.decode()
    assert "<strong>refund</strong>" in page and "agent bug" in page
    assert f'hx-post="{review_url(turn)}"' not in page
    audit = AuditEntry.objects.count()
    refused = viewer.post(review_url(turn), {"verdict": "should_pass"}, headers=HTMX)
    assert refused.status_code == 403
    assert "reviewer role" in refused.content.decode()
    plain = viewer.post(review_url(turn), {"verdict": "should_pass"})
    assert plain.status_code == 403 and "reviewer role" in plain.content.decode()
    assert Review.objects.get().verdict == "agrees" and AuditEntry.objects.count() == audit


def test_a_reviewer_saves_a_review_and_the_panel_shows_it_safely_with_its_history(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    data = {
        "verdict": "should_pass",
        "category": "ground truth wrong",
        "note": "The total is **42.00 EUR** <script>alert(1)</script>",
        "link": "https://issues.example.com/7",
    }
    answer = client.post(review_url(turn), data, headers=HTMX)
    assert answer.status_code == 200
    panel = answer.content.decode()
    assert panel.lstrip().startswith('<section class="review-panel review-done review-disagrees"')
    assert "should have passed" in panel and "ground truth wrong" in panel
    assert "<strong>42.00 EUR</strong>" in panel and "<script>" not in panel
    assert 'href="https://issues.example.com/7"' in panel
    assert "History (1 change)" in panel and "by rita" in panel
    again = client.post(review_url(turn), {**data, "category": "grader wrong"}, headers=HTMX)
    assert "History (2 changes)" in again.content.decode()
    review = Review.objects.get()
    assert (review.verdict, review.category.name if review.category else "") == (
        "should_pass",
        "grader wrong",
    )
    assert TurnRow.objects.get(pk=turn.pk).outcome == "failed"  # the machine's, unchanged
    # Without htmx: back to the case page, at the panel.
    plain = client.post(review_url(turn), data)
    assert plain.status_code == 302 and plain["Location"].endswith(f"#review-turn-{turn.pk}")


def test_a_refused_review_is_a_400_with_the_message_at_its_field_and_the_values_kept(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    audit = AuditEntry.objects.count()  # the role given
    data = {"verdict": "agrees", "note": "keep me", "link": "javascript:alert(1)"}
    answer = client.post(review_url(turn), data, headers=HTMX)
    assert answer.status_code == 400
    panel = answer.content.decode()
    assert f'id="review-turn-{turn.pk}-link-error"' in panel
    assert "a link starts with http:// or https://" in panel
    assert 'aria-invalid="true"' in panel and "keep me" in panel
    unknown = client.post(review_url(turn), {"verdict": "maybe"}, headers=HTMX)
    assert unknown.status_code == 400 and "-verdict-error" in unknown.content.decode()
    plain = client.post(review_url(turn), data)
    assert plain.status_code == 400 and "Review not saved" in plain.content.decode()
    assert not Review.objects.exists() and AuditEntry.objects.count() == audit


def test_a_review_post_without_its_csrf_token_is_refused(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer(project))
    assert client.post(review_url(turn), {"verdict": "agrees"}).status_code == 403
    assert not Review.objects.exists()


def test_a_turn_of_another_case_or_run_is_a_404(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    other_case = CaseRow.objects.filter(run=run).exclude(pk=turn.case_id).first()
    assert other_case is not None
    url = reverse("turn_review", args=[run.pk, other_case.pk, turn.pk])
    assert client.post(url, {"verdict": "agrees"}).status_code == 404


def test_the_case_itself_is_reviewed_on_its_page(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    url = reverse("case_review", args=[run.pk, turn.case_id])
    answer = client.post(url, {"verdict": "unsure", "note": "flaky judge?"}, headers=HTMX)
    assert answer.status_code == 200 and "could not tell" in answer.content.decode()
    review = Review.objects.get()
    assert review.turn_id is None and review.case_id == turn.case_id
    page = client.get(case_url(turn)).content.decode()
    assert f'id="review-case-{turn.case_id}"' in page and "flaky judge?" in page


# --- carried reviews ------------------------------------------------------------------------


def test_a_later_runs_same_failure_offers_the_known_review_and_confirming_it_triages_it(
    project: AgentProject, staff: User
) -> None:
    earlier_run, _, earlier = reviewed(project, staff, category="ground truth wrong")
    run = later_run(project)
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    page = client.get(case_url(turn)).content.decode()
    assert "known</span> (by operator" in page and f"run #{earlier_run.pk}" in page
    assert "Confirm for this run" in page and "Reopen" in page
    answer = client.post(
        review_url(turn, "turn_review_confirm"), {"earlier": earlier.pk}, headers=HTMX
    )
    assert answer.status_code == 200
    panel = answer.content.decode()
    assert "review-done" in panel and "confirmed from <a" in panel
    confirmed = Review.objects.get(turn=turn)
    assert confirmed.carried_from_id == earlier.pk and confirmed.category == earlier.category


def test_reopening_a_known_review_leaves_the_turn_to_be_triaged_again(
    project: AgentProject, staff: User
) -> None:
    _, _, earlier = reviewed(project, staff)
    run = later_run(project)
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    answer = client.post(
        review_url(turn, "turn_review_reopen"), {"earlier": earlier.pk}, headers=HTMX
    )
    panel = answer.content.decode()
    assert answer.status_code == 200 and "reopened" in panel and "review-done" not in panel
    assert "Confirm for this run" not in panel  # no longer offered on this run
    assert Review.objects.get(turn=turn).reopened
    # A confirm naming a review the turn does not carry is refused at its place.
    wrong = client.post(review_url(turn, "turn_review_confirm"), {"earlier": 999999}, headers=HTMX)
    assert wrong.status_code == 400 and "no longer carries" in wrong.content.decode()


def test_a_changed_turn_shows_the_earlier_review_as_stale_never_as_current(
    project: AgentProject, staff: User
) -> None:
    _, _, earlier = reviewed(project, staff)
    run = later_run(project, ground_truth="43.00 EUR")
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    page = client.get(case_url(turn)).content.decode()
    assert "stale</span> the turn changed since" in page
    assert "not reviewed yet" in page and "Confirm for this run" not in page
    refused = client.post(
        review_url(turn, "turn_review_confirm"), {"earlier": earlier.pk}, headers=HTMX
    )
    assert refused.status_code == 400 and not Review.objects.filter(turn=turn).exists()
    other = later_run(project, errored=True)
    other_page = client.get(case_url(failing_turn(other))).content.decode()
    assert "earlier review, another failure" in other_page


# --- the run page ---------------------------------------------------------------------------


def test_the_review_tile_counts_from_peoples_verdicts_and_says_so(
    project: AgentProject, staff: User
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=2, failing=(1, 2, 3)))
    turns = list(TurnRow.objects.filter(run=run, outcome="failed").order_by("case__index"))
    for turn, (verdict, category) in zip(
        turns, [("should_pass", "ground truth wrong"), ("agrees", "agent bug")], strict=False
    ):
        review_save(user=staff, case=turn.case, turn=turn,
                    data=ReviewInput(verdict=verdict, category=category))  # fmt: skip
    client = signed_in(make_user("val"))
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f'hx-get="{reverse("run_review_tile", args=[run.pk])}"' in page
    tile = client.get(reverse("run_review_tile", args=[run.pk]), headers=HTMX).content.decode()
    # Categories by count, a tie in the project's order of them (agent bug comes first).
    assert "3 failed · 2 triaged: 1 agent bug, 1 ground truth wrong" in tile
    assert "1 human disagrees" in tile and "counted from people's verdicts" in tile
    assert "?review=untriaged" in tile and "1 untriaged" in tile


def test_the_review_filters_list_untriaged_triaged_and_disagreeing_cases(
    project: AgentProject, staff: User
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=2, failing=(1, 2, 3)))
    turns = {t.case.index: t for t in TurnRow.objects.filter(run=run, outcome="failed")}
    review_save(user=staff, case=turns[1].case, turn=turns[1],
                data=ReviewInput(verdict="should_pass"))  # fmt: skip
    review_save(user=staff, case=turns[2].case, turn=turns[2],
                data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    client = signed_in(make_user("val"))

    def listed(which: str) -> set[int]:
        page = client.get(reverse("run_detail", args=[run.pk]) + f"?review={which}")
        assert page.status_code == 200
        return {case.index for case in page.context["case_page"].object_list}

    assert listed("untriaged") == {3}
    assert listed("triaged") == {1, 2}
    assert listed("disagrees") == {1}
    page = client.get(reverse("run_detail", args=[run.pk]) + "?review=untriaged").content
    assert b'name="review" value="untriaged"' in page  # the search keeps it
    bad = client.get(reverse("run_detail", args=[run.pk]) + "?review=maybe")
    assert bad.status_code == 400 and b'id="review-error"' in bad.content


# --- the review queue -----------------------------------------------------------------------


def queue_url(project: AgentProject, query: str = "") -> str:
    return reverse("review_queue", args=[project.pk]) + query


def test_the_queue_lists_the_untriaged_failures_of_the_latest_finished_run_of_each_branch(
    project: AgentProject, staff: User
) -> None:
    old_main = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    main = build_run(project, RunSpec(cases=4, turns=2, failing=(1, 2)))
    feature = build_run(project, RunSpec(cases=3, turns=1, failing=(0,)))
    Run.objects.filter(pk=feature.pk).update(git_branch="feature")
    build_run(project, RunSpec(cases=3, turns=2, status=Run.Status.RUNNING))
    triaged = failing_turn(main)
    review_save(user=staff, case=triaged.case, turn=triaged,
                data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    client = signed_in(make_user("val"))
    response = client.get(queue_url(project))
    queue = response.context["queue"]
    assert [run.pk for run in queue.runs] == [feature.pk, main.pk]
    shown = [item.turn.pk for item in queue.items]
    assert triaged.pk not in shown and len(shown) == 2  # main's other failure, feature's error
    assert queue.items[0].turn.run_id == feature.pk  # newest first
    page = response.content.decode()
    assert "1 of 3 triaged" in page and "queue-form" not in page  # a viewer reads it
    chosen = client.get(queue_url(project, f"?runs={old_main.pk}")).context["queue"]
    assert [item.turn.run_id for item in chosen.items] == [old_main.pk]


def test_the_queue_triages_a_failure_and_answers_with_its_item_and_the_progress(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=(1, 2)))
    turn = failing_turn(run)
    client = signed_in(reviewer(project))
    page = client.get(queue_url(project)).content.decode()
    assert 'data-key="g"' in page and "0 of 2 triaged" in page
    url = reverse("queue_triage", args=[project.pk, turn.pk])
    data = {"verdict": "should_pass", "category": "ground truth wrong", "note": "",
            "queue_runs": str(run.pk)}  # fmt: skip
    answer = client.post(url, data, headers=HTMX)
    assert answer.status_code == 200
    item = answer.content.decode()
    assert "queue-done" in item and "ground truth wrong" in item
    assert 'id="queue-progress"' in item and 'hx-swap-oob="true"' in item
    assert "1 of 2 triaged" in item
    refused = client.post(url, {**data, "category": "nope"}, headers=HTMX)
    assert refused.status_code == 400 and "no triage category" in refused.content.decode()
    viewer = signed_in(make_user("val"))
    forbidden = viewer.post(url, data, headers=HTMX)
    assert forbidden.status_code == 403 and "reviewer role" in forbidden.content.decode()
    other = make_project_named("other")
    wrong = client.post(reverse("queue_triage", args=[other.pk, turn.pk]), data, headers=HTMX)
    assert wrong.status_code == 404


def make_project_named(name: str) -> AgentProject:
    return AgentProject.objects.create(name=name, directory=f"/srv/agents/{name}")


def test_the_queue_confirms_a_known_review_and_gives_a_failure_to_someone(
    project: AgentProject, staff: User
) -> None:
    _, _, earlier = reviewed(project, staff, category="ground truth wrong")
    run = later_run(project)
    turn = failing_turn(run)
    rita = reviewer(project)
    client = signed_in(rita)
    page = client.get(queue_url(project)).content.decode()
    assert "data-queue-confirm" in page and "known</span>" in page
    assign = reverse("queue_assign", args=[project.pk, turn.pk])
    answer = client.post(assign, {"assignee": rita.pk, "queue_runs": str(run.pk)}, headers=HTMX)
    assert answer.status_code == 200
    mine = client.get(queue_url(project, "?mine=1")).context["queue"]
    assert [item.turn.pk for item in mine.items] == [turn.pk]
    stranger = make_user("stranger")
    refused = client.post(assign, {"assignee": stranger.pk}, headers=HTMX)
    assert refused.status_code == 400
    confirm = reverse("queue_confirm", args=[project.pk, turn.pk])
    done = client.post(confirm, {"earlier": earlier.pk, "queue_runs": str(run.pk)}, headers=HTMX)
    assert done.status_code == 200 and "queue-done" in done.content.decode()
    review = Review.objects.get(turn=turn)
    assert review.carried_from_id == earlier.pk
    assert not client.get(queue_url(project, "?mine=1")).context["queue"].items


def test_reading_the_queue_and_the_tile_writes_nothing(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=(1, 2)))
    client = signed_in(reviewer(project))
    for url in (queue_url(project), reverse("run_review_tile", args=[run.pk])):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        writes = [
            q["sql"]
            for q in queries.captured_queries
            if q["sql"].startswith(("INSERT", "UPDATE", "DELETE"))
        ]
        assert writes == [], url


def many_failures(project: AgentProject, staff: User) -> Run:
    """A run of 120 failing turns, 20 of them triaged, 10 more assigned, after an earlier run
    whose reviews 30 of them carry (the queue's time at 1,000 failures is measured by
    benchmarks/pages_bench.py, not here)."""
    earlier = build_run(project, RunSpec(cases=60, turns=2, failing=range(0, 60)))
    for turn in TurnRow.objects.filter(run=earlier, outcome="failed").select_related("case__run")[
        :30
    ]:
        review_save(user=staff, case=turn.case, turn=turn,
                    data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    run = build_run(project, RunSpec(cases=120, turns=2, failing=range(0, 120)))
    failing = list(
        TurnRow.objects.filter(run=run, outcome="failed").select_related("case__run")[:30]
    )
    for turn in failing[:20]:
        review_save(user=staff, case=turn.case, turn=turn,
                    data=ReviewInput(verdict="agrees", category="grader wrong"))  # fmt: skip
    for turn in failing[20:30]:
        review_assign(user=staff, case=turn.case, turn=turn, assignee_id=staff.pk)
    return run


def test_the_queue_reads_a_fixed_number_of_queries_whatever_its_failures(
    project: AgentProject, staff: User, django_assert_max_num_queries: AssertQueries
) -> None:
    run = many_failures(project, staff)
    client = signed_in(staff)
    url = queue_url(project, f"?runs={run.pk}")
    with django_assert_max_num_queries(16) as captured:
        response = client.get(url)
    assert response.status_code == 200
    queue = response.context["queue"]
    assert (queue.progress.failures, queue.progress.triaged) == (120, 20)
    assert "20 of 120 triaged" in response.content.decode()
    small = build_run(project, RunSpec(cases=4, turns=2, failing=(1, 2)))
    with CaptureQueriesContext(connection) as few:
        client.get(queue_url(project, f"?runs={small.pk}"))
    assert len(few) == len(captured)  # type: ignore[arg-type]
    with CaptureQueriesContext(connection) as last_page:
        client.get(f"{url}&page=5")
    assert len(last_page) == len(captured)  # type: ignore[arg-type]
    mine = client.get(queue_url(project, f"?runs={run.pk}&mine=1")).context["queue"]
    assert mine.page.paginator.count == 10

"""Roles per project (issue 39): the roles and categories page, the rights each role gives on
the pages and in the API (buttons shown only to who may press them), and the audit log (its
page and its endpoint, staff only)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, Run, TurnRow
from runs.review_models import AuditEntry, ProjectRole, TriageCategory
from runs.services.audit import audit_write
from runs.services.projects import project_update
from runs.services.reviews import role_set
from runs.services.tokens import token_create
from runs.web.audit import ENTRIES_PER_PAGE
from tests.web.factories import RunSpec, build_run, make_project, make_user

pytestmark = pytest.mark.django_db


def signed_in(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def holding(project: AgentProject, username: str, role: str) -> User:
    user = make_user(username)
    ProjectRole.objects.create(project=project, user=user, role=role)
    return user


# --- the roles page ---------------------------------------------------------------------------


def test_a_project_admin_gives_changes_and_takes_away_a_role_each_change_audited(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    make_user("alice")
    signed_in(client, admin)
    url = reverse("project_role_set", args=[project.pk])
    for role in ("reviewer", "runner", ""):
        response = client.post(url, {"username": "alice", "role": role})
        assert response.status_code == 302
        assert response["Location"] == reverse("project_roles", args=[project.pk])
    assert not ProjectRole.objects.filter(user__username="alice").exists()
    entries = AuditEntry.objects.order_by("id")
    assert [(e.action, e.username, e.project_id) for e in entries] == [
        ("role.set", "lead", project.pk)
    ] * 3
    assert [(e.before, e.after) for e in entries][1:] == [
        ({"user": entries[0].object_id, "role": "reviewer"},
         {"user": entries[0].object_id, "role": "runner"}),
        ({"user": entries[0].object_id, "role": "runner"}, None),
    ]  # fmt: skip


def test_the_roles_page_lists_who_holds_which_role_and_offers_every_role(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    holding(project, "rita", "reviewer")
    page = signed_in(client, admin).get(reverse("project_roles", args=[project.pk]))
    assert page.status_code == 200
    html = page.text
    assert 'data-user="rita"' in html and 'data-user="lead"' in html
    for role in ("viewer", "reviewer", "runner", "admin"):
        assert f'<option value="{role}"' in html
    # The default categories, offered until the first change stores them.
    assert 'data-category="ground truth wrong"' in html
    assert not TriageCategory.objects.exists()  # a GET writes nothing


def test_giving_a_role_to_no_such_user_is_said_at_the_user_field_and_writes_nothing(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    response = signed_in(client, admin).post(
        reverse("project_role_set", args=[project.pk]), {"username": "ghost", "role": "runner"}
    )
    assert response.status_code == 400
    assert "no active user is called &#x27;ghost&#x27;" in response.text
    assert not AuditEntry.objects.exists()


def test_a_runner_can_neither_open_the_roles_page_nor_give_a_role(
    client: Client, project: AgentProject
) -> None:
    runner = holding(project, "rob", "runner")
    signed_in(client, runner)
    page = client.get(reverse("project_roles", args=[project.pk]))
    assert page.status_code == 403
    assert (
        f"You need the admin role in project {project.name} to manage this project&#x27;s roles;"
        " ask a project admin." in page.text
    )
    refused = client.post(
        reverse("project_role_set", args=[project.pk]), {"username": "rob", "role": "admin"}
    )
    assert refused.status_code == 403
    assert ProjectRole.objects.get(user=runner).role == "runner"
    assert not AuditEntry.objects.exists()


def test_an_admin_of_one_project_has_no_rights_in_another(client: Client) -> None:
    mine, theirs = make_project("mine", "/srv/mine"), make_project("theirs", "/srv/theirs")
    admin = holding(mine, "lead", "admin")
    signed_in(client, admin)
    assert client.get(reverse("project_roles", args=[mine.pk])).status_code == 200
    assert client.get(reverse("project_roles", args=[theirs.pk])).status_code == 403
    assert client.get(reverse("project_edit", args=[theirs.pk])).status_code == 403


# --- categories -------------------------------------------------------------------------------


def test_an_admin_renames_re_keys_and_archives_a_default_category_and_adds_one(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    signed_in(client, admin)
    url = reverse("project_category_save", args=[project.pk])
    renamed = client.post(
        url, {"was": "accepted", "name": "accepted as is", "key": "k", "archived": "on"}
    )
    assert renamed.status_code == 302
    added = client.post(url, {"name": "prompt  too long", "key": "p"})
    assert added.status_code == 302
    stored = {c.name: (c.key, c.archived) for c in TriageCategory.objects.filter(project=project)}
    assert stored["accepted as is"] == ("k", True) and "accepted" not in stored
    assert stored["prompt too long"] == ("p", False)  # spaces folded
    assert len(stored) == 6
    audit = list(AuditEntry.objects.order_by("id").values_list("action", "before", "after"))
    assert audit == [
        ("category.save", {"name": "accepted", "key": "c", "archived": False},
         {"name": "accepted as is", "key": "k", "archived": True}),
        ("category.save", None, {"name": "prompt too long", "key": "p", "archived": False}),
    ]  # fmt: skip


def test_a_category_named_like_another_is_refused_at_its_name_and_writes_nothing(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    response = signed_in(client, admin).post(
        reverse("project_category_save", args=[project.pk]), {"name": "agent bug"}
    )
    assert response.status_code == 400
    assert "this project has a category &#x27;agent bug&#x27; already" in response.text
    assert not AuditEntry.objects.exists()


def test_another_projects_category_cannot_be_changed_through_this_one(
    client: Client, project: AgentProject
) -> None:
    other = make_project("other", "/srv/other")
    theirs = TriageCategory.objects.create(project=other, name="theirs")
    admin = holding(project, "lead", "admin")
    response = signed_in(client, admin).post(
        reverse("project_category_save", args=[project.pk]),
        {"category": str(theirs.pk), "name": "mine now"},
    )
    assert response.status_code == 400
    assert "no such category in this project" in response.text
    assert TriageCategory.objects.get(pk=theirs.pk).name == "theirs"


# --- rights shown as buttons ------------------------------------------------------------------


def test_the_run_page_offers_run_actions_to_a_runner_of_its_project_only(
    client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, status=Run.Status.RUNNING, done=1))
    url = reverse("run_detail", args=[run.pk])
    viewer = signed_in(Client(), make_user("vera")).get(url).text
    reviewer = signed_in(Client(), holding(project, "rita", "reviewer")).get(url).text
    runner = signed_in(client, holding(project, "rob", "runner")).get(url).text
    for html in (viewer, reviewer):
        assert "cancel-form" not in html and "keep-form" not in html
    assert "cancel-form" in runner and "keep-form" in runner


def test_the_project_page_offers_launch_to_runners_and_edit_roles_remove_to_admins(
    project: AgentProject,
) -> None:
    url = reverse("project_detail", args=[project.pk])
    pages = {
        role: signed_in(Client(), holding(project, role, role)).get(url).text
        for role in ("reviewer", "runner", "admin")
    }
    launch = reverse("project_launch", args=[project.pk])
    roles = reverse("project_roles", args=[project.pk])
    assert launch not in pages["reviewer"] and roles not in pages["reviewer"]
    assert launch in pages["runner"] and roles not in pages["runner"]
    assert launch in pages["admin"] and roles in pages["admin"]


def test_the_home_page_offers_launch_on_the_projects_a_user_runs_only(
    project: AgentProject,
) -> None:
    other = make_project("other-agent", "/srv/agents/other")
    runner = holding(project, "rita", "runner")
    page = signed_in(Client(), runner).get(reverse("home")).text
    assert reverse("project_launch", args=[project.pk]) in page
    assert reverse("project_launch", args=[other.pk]) not in page
    viewer_page = signed_in(Client(), make_user("vera")).get(reverse("home")).text
    assert "Launch…" not in viewer_page


def test_a_run_of_no_project_is_cancelled_by_staff_only(
    client: Client, staff: User, project: AgentProject
) -> None:
    holding(project, "rob", "runner")
    run = build_run(None, RunSpec(cases=2, turns=1, status=Run.Status.RUNNING, done=1))
    runner = signed_in(Client(), User.objects.get(username="rob"))
    refused = runner.post(reverse("run_cancel", args=[run.pk]))
    assert refused.status_code == 403
    assert "Only staff can cancel runs that belong to no project." in refused.text
    assert signed_in(client, staff).post(reverse("run_cancel", args=[run.pk])).status_code == 302


def test_the_api_says_the_callers_role_in_each_project(
    client: Client, project: AgentProject, staff: User
) -> None:
    other = make_project("other", "/srv/other")
    rob = holding(project, "rob", "runner")
    _, secret = token_create(user=rob, name="ci")
    _, staff_secret = token_create(user=staff, name="ci")
    listed = client.get("/api/v1/projects", headers={"Authorization": f"Bearer {secret}"})
    assert {p["name"]: p["role"] for p in listed.json()["items"]} == {
        project.name: "runner",
        "other": "viewer",
    }
    one = client.get(
        f"/api/v1/projects/{other.pk}", headers={"Authorization": f"Bearer {staff_secret}"}
    )
    assert one.json()["role"] == "admin"


def test_the_api_lists_a_projects_roles_and_categories(
    client: Client, project: AgentProject
) -> None:
    lead = holding(project, "lead", "admin")
    holding(project, "rita", "reviewer")
    _, secret = token_create(user=lead, name="ci")
    auth = {"Authorization": f"Bearer {secret}"}
    roles = client.get(f"/api/v1/projects/{project.pk}/roles", headers=auth).json()
    assert roles == [{"user": "lead", "role": "admin"}, {"user": "rita", "role": "reviewer"}]
    categories = client.get(f"/api/v1/projects/{project.pk}/categories", headers=auth).json()
    assert categories[0] == {"id": None, "name": "agent bug", "key": "a", "archived": False}


# --- projects in the audit log ----------------------------------------------------------------


def test_editing_a_project_writes_its_fields_before_and_after_and_an_unchanged_save_nothing(
    project: AgentProject, staff: User
) -> None:
    project_update(project=project, name="renamed", description="new", user=staff)
    project_update(project=project, name="renamed", description="new", user=staff)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.object_type, entry.object_id) == (
        "project.edit",
        "project",
        project.pk,
    )
    assert entry.before is not None and entry.after is not None
    assert (entry.before["name"], entry.after["name"]) == ("weather-agent", "renamed")
    assert entry.after["description"] == "new"


# --- the audit page and endpoint --------------------------------------------------------------


def entries(project: AgentProject, staff: User, count: int) -> None:
    for number in range(count):
        audit_write(user=staff, action="role.set", object_type="project_role",
                    object_id=number, project_id=project.pk, before=None,
                    after={"user": number, "role": "runner"})  # fmt: skip


def test_staff_read_the_audit_log_filtered_by_project_user_and_action_a_page_at_a_time(
    client: Client, staff: User, project: AgentProject
) -> None:
    other = make_project("other", "/srv/other")
    entries(project, staff, ENTRIES_PER_PAGE + 1)
    role_set(by=make_user("lead"), project_id=other.pk, user_id=staff.pk, role="admin")
    signed_in(client, staff)
    first = client.get(reverse("audit"))
    assert first.status_code == 200
    assert first.text.count('class="audit-entry"') == ENTRIES_PER_PAGE
    assert f"page 1 of 2 · {ENTRIES_PER_PAGE + 2} entries" in first.text
    mine = client.get(reverse("audit"), {"project": str(other.pk), "action": "role.set"})
    assert mine.text.count('class="audit-entry"') == 1 and ">lead<" in mine.text
    by_user = client.get(reverse("audit"), {"user": "lead", "page": "1"})
    assert by_user.text.count('class="audit-entry"') == 1
    assert client.get(reverse("audit"), {"action": "nonsense"}).status_code == 400


def test_the_audit_log_is_for_staff_only_on_the_page_and_in_the_api(
    client: Client, project: AgentProject
) -> None:
    admin = holding(project, "lead", "admin")
    signed_in(client, admin)
    page = client.get(reverse("audit"))
    assert page.status_code == 403 and "Only staff can read the audit log." in page.text
    assert 'href="/audit/"' not in client.get(reverse("home")).text
    refused = client.get("/api/v1/audit")
    assert refused.status_code == 403
    assert refused.json() == {"detail": "Only staff can read the audit log."}


def test_the_audit_endpoint_gives_each_entry_newest_first_with_its_filters(
    client: Client, staff: User, project: AgentProject
) -> None:
    entries(project, staff, 3)
    _, secret = token_create(user=staff, name="ci")
    auth = {"Authorization": f"Bearer {secret}"}
    answer = client.get("/api/v1/audit", {"limit": 2}, headers=auth).json()
    assert answer["count"] == 3 and [e["object_id"] for e in answer["items"]] == [2, 1]
    first = answer["items"][0]
    assert (first["user"], first["action"], first["project_name"]) == (
        staff.username,
        "role.set",
        project.name,
    )
    assert first["before"] is None and first["after"] == {"user": 2, "role": "runner"}
    none = client.get("/api/v1/audit", {"action": "project.edit"}, headers=auth).json()
    assert none["count"] == 0


@pytest.mark.parametrize("runs", ["keep", "delete"])
def test_a_project_whose_runs_were_reviewed_is_removed_with_its_reviews_runs_kept_or_not(
    client: Client, staff: User, project: AgentProject, runs: str
) -> None:
    from runs.review_models import Review
    from runs.services.reviews import ReviewInput, review_save

    run = build_run(project, RunSpec(cases=2, turns=2, failing=(1,)))
    turn = TurnRow.objects.get(run=run, outcome="failed")
    review_save(user=staff, case=turn.case, turn=turn,
                data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    response = signed_in(client, staff).post(
        reverse("project_remove", args=[project.pk]), {"runs": runs}
    )
    assert response.status_code == 302
    assert not AgentProject.objects.exists() and not Review.objects.exists()
    assert Run.objects.count() == (1 if runs == "keep" else 0)
    removed = AuditEntry.objects.get(action="project.remove")
    assert removed.before is not None and removed.before["runs"] == (
        "kept" if runs == "keep" else "deleted"
    )

"""Who may write what (issue 39, roles per project): every write of the pages and the API tried
as anonymous, a viewer (no role), a reviewer, a runner, an admin of the project and staff, with
and without the CSRF token. A refused write is a 401 or a login redirect (anonymous) or a 403,
changes nothing and writes nothing to the audit log; an accepted write of a review, a role, a
category or a project writes exactly one audit entry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import NoReverseMatch, reverse
from pytest_django import DjangoDbBlocker

from runs.models import AgentProject, Run, TurnRow
from runs.review_models import AuditEntry, ProjectRole, Review, TriageCategory
from runs.services.reviews import ReviewInput, review_save
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.shared_rows import rows_shared_by_the_module

pytestmark = pytest.mark.django_db

WHO = ("anonymous", "viewer", "reviewer", "runner", "admin", "staff")
# What each caller may do: the roles it holds (staff: every one, and staff's own writes).
RIGHTS = {
    "anonymous": set(),
    "viewer": {"viewer"},
    "reviewer": {"viewer", "reviewer"},
    "runner": {"viewer", "reviewer", "runner"},
    "admin": {"viewer", "reviewer", "runner", "admin"},
    "staff": {"viewer", "reviewer", "runner", "admin", "staff"},
}
CSRF = "Q" * 32  # a CSRF secret as the cookie holds it; the form sends it back unmasked

AGENT = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: greeting
    input: Hi
    ground_truth: Hello
"""


@dataclass
class World:
    project: AgentProject
    users: dict[str, User]
    finished: Run  # a finished failing run (reviews, keep, re-run, re-grade)
    turn: TurnRow  # its failing turn, carrying ``earlier``'s review as known
    earlier: Review  # the review of the same turn on an earlier run
    running: Run  # a running run (cancel)
    other: User  # a user without a role, to give one
    second: Path  # an agent directory to register
    spare: AgentProject  # a project without runs, to remove (the same roles as ``project``)


@pytest.fixture(scope="module")
def world(
    django_db_setup: None,
    django_db_blocker: DjangoDbBlocker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    """One world for the module's 366 tests (building it per test was 18 of their 31 s): each
    test runs in a savepoint rolled back after it (tests/web/shared_rows.py), so each starts
    from the world as made here and no test sees another's writes."""
    directory = tmp_path_factory.mktemp("authorization")
    yield from rows_shared_by_the_module(django_db_blocker, lambda: make_world(directory))


def make_world(tmp_path: Path) -> World:
    (tmp_path / "agent.yaml").write_text(AGENT)
    second = tmp_path / "second"
    second.mkdir()
    (second / "agent.yaml").write_text(AGENT)
    project = AgentProject.objects.create(name="tiny", directory=str(tmp_path))
    users = {who: make_user(who, staff=who == "staff") for who in WHO if who != "anonymous"}
    spare = AgentProject.objects.create(name="spare", directory=str(tmp_path / "spare"))
    for role in ("reviewer", "runner", "admin"):
        for held_in in (project, spare):
            ProjectRole.objects.create(project=held_in, user=users[role], role=role)
    spec = RunSpec(cases=2, turns=2, failing=(1,))
    before = build_run(project, spec)
    earlier_turn = TurnRow.objects.get(run=before, outcome="failed")
    earlier = review_save(user=users["staff"], case=earlier_turn.case, turn=earlier_turn,
                          data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    finished = build_run(project, spec)
    running = build_run(project, RunSpec(cases=2, turns=1, status=Run.Status.RUNNING, done=1))
    AuditEntry.objects.all().delete()  # the setting up's own entries
    return World(
        project=project,
        users=users,
        finished=finished,
        turn=TurnRow.objects.get(run=finished, outcome="failed"),
        earlier=earlier,
        running=running,
        other=make_user("newcomer"),
        second=second,
        spare=spare,
    )


@dataclass(frozen=True)
class Write:
    """One write: the role it needs, how a page (or the API) asks for it, the status it answers
    when accepted, the audit action it writes (None: not audited) and how to tell it was done."""

    name: str
    needs: str
    ask: Callable[[World], tuple[str, dict[str, Any]]]  # url, data
    accepted: int
    audited: str | None
    done: Callable[[World], bool] | None  # None: nothing to tell apart (said on the page)


def _turn_url(name: str) -> Callable[[World], str]:
    return lambda w: reverse(name, args=[w.finished.pk, w.turn.case_id, w.turn.pk])


def _review_of(w: World) -> Review | None:
    return Review.objects.filter(turn=w.turn).first()


PAGE_WRITES = [
    Write("review a turn", "reviewer",
          lambda w: (_turn_url("turn_review")(w), {"verdict": "should_pass",
                                                  "category": "grader wrong", "note": "n"}),
          302, "review.save", lambda w: _review_of(w) is not None),
    Write("confirm a carried review", "reviewer",
          lambda w: (_turn_url("turn_review_confirm")(w), {"earlier": w.earlier.pk}),
          302, "review.save",
          lambda w: getattr(_review_of(w), "carried_from_id", None) == w.earlier.pk),
    Write("reopen a carried review", "reviewer",
          lambda w: (_turn_url("turn_review_reopen")(w), {"earlier": w.earlier.pk}),
          302, "review.reopen", lambda w: getattr(_review_of(w), "reopened", False)),
    Write("review a case", "reviewer",
          lambda w: (reverse("case_review", args=[w.finished.pk, w.turn.case_id]),
                     {"verdict": "agrees", "category": "agent bug"}),
          302, "review.save",
          lambda w: Review.objects.filter(case=w.turn.case, turn__isnull=True).exists()),
    Write("give a role", "admin",
          lambda w: (reverse("project_role_set", args=[w.project.pk]),
                     {"username": "newcomer", "role": "reviewer"}),
          302, "role.set", lambda w: ProjectRole.objects.filter(user=w.other).exists()),
    Write("add a triage category", "admin",
          lambda w: (reverse("project_category_save", args=[w.project.pk]),
                     {"name": "prompt too long", "key": "p"}),
          302, "category.save",
          lambda w: TriageCategory.objects.filter(name="prompt too long").exists()),
    Write("edit the project", "admin",
          lambda w: (reverse("project_edit", args=[w.project.pk]),
                     {"name": "renamed", "description": ""}),
          302, "project.edit", lambda w: AgentProject.objects.filter(name="renamed").exists()),
    Write("remove the project", "admin",
          lambda w: (reverse("project_remove", args=[w.spare.pk]), {"runs": "keep"}),
          302, "project.remove", lambda w: not AgentProject.objects.filter(pk=w.spare.pk).exists()),
    Write("launch a run", "runner",
          lambda w: (reverse("project_launch", args=[w.project.pk]), {"git_ref": ""}),
          302, None, lambda w: Run.objects.count() == 4),
    Write("cancel a run", "runner",
          lambda w: (reverse("run_cancel", args=[w.running.pk]), {}),
          302, None, lambda w: Run.objects.get(pk=w.running.pk).status == Run.Status.CANCELLED),
    Write("keep a run", "runner",
          lambda w: (reverse("run_keep", args=[w.finished.pk]), {"keep": "1"}),
          302, None, lambda w: Run.objects.get(pk=w.finished.pk).keep),
    # A run built here has no snapshot and no transcripts: the re-run and the re-grade, let
    # through, say why they cannot be done on the run's page (a redirect), refused a 403.
    Write("re-run a run's failed cases", "runner",
          lambda w: (reverse("run_rerun", args=[w.finished.pk]), {"cases": "failed"}),
          302, None, None),
    Write("re-grade a run", "runner",
          lambda w: (reverse("run_regrade", args=[w.finished.pk]), {"git_ref": ""}),
          302, None, None),
    Write("register a project", "staff",
          lambda w: (reverse("project_new"), {"path": str(w.second), "name": "second"}),
          302, "project.register", lambda w: AgentProject.objects.filter(name="second").exists()),
]  # fmt: skip


def page_client(world: World, who: str, *, csrf: bool) -> Client:
    client = Client(enforce_csrf_checks=True)
    if who != "anonymous":
        client.force_login(world.users[who])
    if csrf:
        client.cookies["csrftoken"] = CSRF
    return client


def page_post(world: World, write: Write, who: str, *, csrf: bool) -> Any:
    try:
        url, data = write.ask(world)
    except NoReverseMatch:
        pytest.skip(f"{write.name}: no page yet")
    client = page_client(world, who, csrf=csrf)
    return client.post(url, {**data, **({"csrfmiddlewaretoken": CSRF} if csrf else {})})


def audit_actions() -> list[str]:
    return list(AuditEntry.objects.values_list("action", flat=True))


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("write", PAGE_WRITES, ids=[w.name for w in PAGE_WRITES])
def test_a_page_write_is_accepted_only_with_its_role_and_the_csrf_token(
    world: World, write: Write, who: str
) -> None:
    response = page_post(world, write, who, csrf=True)
    if who == "anonymous":
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    elif write.needs in RIGHTS[who]:
        assert response.status_code == write.accepted, response.content[:500]
        assert write.done is None or write.done(world)
        assert audit_actions() == ([write.audited] if write.audited else [])
        return
    else:
        assert response.status_code == 403
        needs = "Only staff" if write.needs == "staff" else f"the {write.needs} role"
        assert needs in response.text or "reviewer role" in response.text
    assert write.done is None or not write.done(world)
    assert audit_actions() == []


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("write", PAGE_WRITES, ids=[w.name for w in PAGE_WRITES])
def test_a_page_write_without_the_csrf_token_is_refused_whoever_sends_it(
    world: World, write: Write, who: str
) -> None:
    response = page_post(world, write, who, csrf=False)
    assert response.status_code == 403
    assert "CSRF" in response.text
    assert write.done is None or not write.done(world)
    assert audit_actions() == []


# --- the API ------------------------------------------------------------------------------

API = "/api/v1"


def _turn_api(w: World) -> str:
    turn = w.turn
    return f"{API}/runs/{w.finished.pk}/cases/{turn.case_id}/turns/{turn.index}/review"


@dataclass(frozen=True)
class ApiWrite:
    name: str
    needs: str
    ask: Callable[[World], tuple[str, str, dict[str, Any]]]  # method, url, JSON body
    accepted: int
    audited: str | None
    done: Callable[[World], bool] | None


API_WRITES = [
    ApiWrite("review a turn", "reviewer",
             lambda w: ("put", _turn_api(w), {"verdict": "should_pass", "category": "agent bug"}),
             201, "review.save", lambda w: _review_of(w) is not None),
    ApiWrite("review a case", "reviewer",
             lambda w: ("put", f"{API}/runs/{w.finished.pk}/cases/{w.turn.case_id}/review",
                        {"verdict": "agrees", "category": "agent bug"}),
             201, "review.save",
             lambda w: Review.objects.filter(case_id=w.turn.case_id, turn=None).exists()),
    ApiWrite("confirm a carried review", "reviewer",
             lambda w: ("post", _turn_api(w) + "/confirm", {"earlier": w.earlier.pk}),
             200, "review.save",
             lambda w: getattr(_review_of(w), "carried_from_id", None) == w.earlier.pk),
    ApiWrite("reopen a carried review", "reviewer",
             lambda w: ("post", _turn_api(w) + "/reopen", {"earlier": w.earlier.pk}),
             200, "review.reopen", lambda w: getattr(_review_of(w), "reopened", False)),
    ApiWrite("give a role", "admin",
             lambda w: ("post", f"{API}/projects/{w.project.pk}/roles",
                        {"user": "newcomer", "role": "runner"}),
             200, "role.set", lambda w: ProjectRole.objects.filter(user=w.other).exists()),
    ApiWrite("add a triage category", "admin",
             lambda w: ("post", f"{API}/projects/{w.project.pk}/categories",
                        {"name": "prompt too long", "key": "p"}),
             201, "category.save",
             lambda w: TriageCategory.objects.filter(name="prompt too long").exists()),
    ApiWrite("register a project", "staff",
             lambda w: ("post", f"{API}/projects", {"path": str(w.second), "name": "second"}),
             201, "project.register",
             lambda w: AgentProject.objects.filter(name="second").exists()),
    ApiWrite("launch a run", "runner",
             lambda w: ("post", f"{API}/runs", {"project": w.project.pk}),
             201, None, lambda w: Run.objects.count() == 4),
    ApiWrite("cancel a run", "runner",
             lambda w: ("post", f"{API}/runs/{w.running.pk}/cancel", {}),
             200, None,
             lambda w: Run.objects.get(pk=w.running.pk).status == Run.Status.CANCELLED),
    ApiWrite("keep a run", "runner",
             lambda w: ("post", f"{API}/runs/{w.finished.pk}/keep", {"keep": True}),
             200, None, lambda w: Run.objects.get(pk=w.finished.pk).keep),
    # Let through, a run without a snapshot cannot be re-run: 409, not the 403 of a refusal.
    ApiWrite("re-run a run's failed cases", "runner",
             lambda w: ("post", f"{API}/runs/{w.finished.pk}/rerun", {"cases": "failed"}),
             409, None, None),
]  # fmt: skip

HOW = ("token", "session with CSRF", "session without CSRF")


def api_send(world: World, write: ApiWrite, who: str, how: str) -> Any:
    method, url, body = write.ask(world)
    client = Client(enforce_csrf_checks=True)
    headers: dict[str, str] = {}
    if who != "anonymous" and how == "token":
        _, secret = token_create(user=world.users[who], name="matrix")
        headers["Authorization"] = f"Bearer {secret}"
    elif who != "anonymous":
        client.force_login(world.users[who])
        if how == "session with CSRF":
            client.cookies["csrftoken"] = CSRF
            headers["X-CSRFToken"] = CSRF
    send = getattr(client, method)
    return send(url, body, content_type="application/json", headers=headers)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("write", API_WRITES, ids=[w.name for w in API_WRITES])
def test_an_api_write_is_accepted_only_with_its_role_and_a_token_or_the_csrf_token(
    world: World, write: ApiWrite, who: str, how: str
) -> None:
    response = api_send(world, write, who, how)
    if who == "anonymous":
        assert response.status_code == 401
    elif how == "session without CSRF":
        assert response.status_code == 403
        assert "CSRF" in response.json()["detail"]
    elif write.needs in RIGHTS[who]:
        assert response.status_code == write.accepted, response.content[:500]
        assert write.done is None or write.done(world)
        assert audit_actions() == ([write.audited] if write.audited else [])
        return
    else:
        assert response.status_code == 403
        detail = response.json()["detail"]
        assert (f"the {write.needs} role" in detail) or ("Only staff" in detail), detail
    assert write.done is None or not write.done(world)
    assert audit_actions() == []

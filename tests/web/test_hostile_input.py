"""Hostile input (issue 38, item 8): a form value with a trailing newline or non-ASCII digits
is refused with the page's message, never a 500 nor quietly read as a number; a client error
logs one line without a traceback; an anonymous API write is a 401, not a CSRF 403."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client, RequestFactory

from holodeck_web.logs import JsonFormatter, TextFormatter
from runs.models import Run
from runs.services.tokens import token_create
from runs.web.params import page_param
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db

RERUN_REFUSED = "Cannot re-run: say which cases (failed, or a case's index)."


def arabic_indic(number: int) -> str:
    """``number`` in Arabic-Indic digits ("٣" for 3), which ``int()`` reads as ASCII ones."""
    return "".join(chr(0x0660 + int(digit)) for digit in str(number))


def said(response: object) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]  # type: ignore[attr-defined]


def bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=user, name='ci')[1]}"}


# --- the re-run form -------------------------------------------------------------------------


@pytest.mark.parametrize("cases", ["failed\n", "3\n", "٣", "３", "²", " failed", "0x1"])
def test_a_rerun_of_cases_with_a_trailing_newline_or_foreign_digits_is_refused_on_the_page(
    staff_client: Client, cases: str
) -> None:
    run = build_run()

    response = staff_client.post(f"/runs/{run.pk}/rerun/", {"cases": cases})

    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert said(response) == [RERUN_REFUSED]
    assert Run.objects.count() == 1


def test_a_rerun_with_a_malformed_idempotency_key_is_refused_on_the_page(
    staff_client: Client,
) -> None:
    run = build_run()

    response = staff_client.post(
        f"/runs/{run.pk}/rerun/", {"cases": "failed", "idempotency_key": "no spaces allowed"}
    )

    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    (message,) = said(response)
    assert message.startswith("Cannot re-run: an idempotency key is 1 to 100 characters")


# --- ids and whole numbers are ASCII digits --------------------------------------------------


@pytest.mark.parametrize("limit", ["٣", "３", "1\u0663"])
def test_a_launch_with_a_limit_in_foreign_digits_is_refused_at_its_field(
    staff_client: Client, tmp_path: Path, limit: str
) -> None:
    project = example_project(tmp_path)

    response = staff_client.post(f"/projects/{project.pk}/launch/", {"limit": limit})

    assert response.status_code == 400  # the form again, its problem at the field
    assert "Enter a whole number." in response.text
    assert Run.objects.count() == 0


def test_the_import_page_refuses_a_project_id_in_foreign_digits(staff_client: Client) -> None:
    project = make_project()

    response = staff_client.post("/import/", {"project": arabic_indic(project.pk)})

    assert response.status_code == 200
    assert "Select a valid choice" in response.text
    assert "Choose at least one result file" not in response.text


@pytest.mark.parametrize("given", ["foreign", "²", "３", "1.0"])
def test_the_import_api_refuses_a_project_id_that_is_not_ascii_digits(
    client: Client, staff: User, given: str
) -> None:
    project = make_project()
    value = arabic_indic(project.pk) if given == "foreign" else given

    response = client.post("/api/v1/imports", {"project": value}, headers=bearer(staff))

    assert response.status_code == 422
    assert "is not a project id" in response.json()["detail"]


@pytest.mark.parametrize("baseline", ["²", "٣", "1" * 150])
def test_the_gate_refuses_a_baseline_id_that_is_not_a_plain_run_id(
    client: Client, viewer: User, baseline: str
) -> None:
    run = build_run()

    response = client.post(
        "/api/v1/gate",
        {"run": run.pk, "baseline": baseline},
        content_type="application/json",
        headers=bearer(viewer),
    )

    assert response.status_code == 422
    assert "use a run id" in response.json()["detail"]


@pytest.mark.parametrize("page", ["٢", "２", "²", "2\n2"])
def test_a_page_number_in_foreign_digits_is_the_first_page_as_any_unreadable_one(
    viewer_client: Client, page: str
) -> None:
    for _ in range(51):  # two pages of 50
        build_run(spec=RunSpec(cases=1, turns=1))

    second = viewer_client.get("/runs/", {"page": "2"})
    foreign = viewer_client.get("/runs/", {"page": page})

    assert "page 2 of 2" in second.text
    assert "page 1 of 2" in foreign.text


def test_page_param_keeps_ascii_digits_only() -> None:
    factory = RequestFactory()
    pages = ["3", " 12 ", "٣", "³", "-1", "", "abc"]
    read = [page_param(factory.get("/", {"page": page}), "page") for page in pages]
    assert read == ["3", "12", None, None, None, None, None]


# --- a client error logs one line ------------------------------------------------------------


def test_a_bad_query_parameter_logs_one_line_without_a_traceback(
    viewer_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        response = viewer_client.get("/trends/?kinds=exploded")

    assert response.status_code == 400
    (record,) = [record for record in caplog.records if record.name == "django.request"]
    assert record.exc_info is None and record.exc_text is None
    assert "unknown kind 'exploded'" in record.getMessage()
    for formatter in (TextFormatter(), JsonFormatter()):
        text = formatter.format(record)
        assert "\n" not in text and "Traceback" not in text


def test_the_console_handler_drops_a_client_errors_traceback_but_keeps_a_server_errors() -> None:
    # The handler LOGGING gives Django's loggers (the tests' capture handlers have no filter).
    (console,) = [handler for handler in logging.getLogger("django").handlers if handler.filters]
    try:
        raise ValueError("boom")
    except ValueError as exc:
        exc_info = (type(exc), exc, exc.__traceback__)

    def record(name: str, status: int) -> logging.LogRecord:
        made = logging.LogRecord(name, logging.WARNING, __file__, 1, "x", None, exc_info)
        made.status_code = status
        return made

    client_error = record("django.security.DisallowedHost", 400)
    server_error = record("django.request", 500)
    assert console.filter(client_error) and console.filter(server_error)
    assert client_error.exc_info is None
    assert server_error.exc_info == exc_info


# --- an anonymous API write is a 401 ---------------------------------------------------------

ANONYMOUS_WRITES = [
    ("/api/v1/runs", {"project": 1}),
    ("/api/v1/runs/1/rerun", {"cases": "failed"}),
    ("/api/v1/runs/1/keep", {"keep": True}),
    ("/api/v1/runs/1/cancel", {}),
    ("/api/v1/imports", {}),
    ("/api/v1/projects", {"path": "/srv/agents/x"}),
    ("/api/v1/gate", {"run": 1, "baseline": 2}),
]


@pytest.mark.parametrize("path, body", ANONYMOUS_WRITES)
def test_an_anonymous_api_write_is_a_401_not_a_csrf_403(path: str, body: dict[str, object]) -> None:
    client = Client(enforce_csrf_checks=True)

    response = client.post(path, body, content_type="application/json")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_signed_in_browser_write_without_its_csrf_token_is_still_a_403(viewer: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)

    response = client.post("/api/v1/runs/1/keep", {"keep": True}, content_type="application/json")

    assert response.status_code == 403
    assert response.json() == {"detail": "CSRF check Failed"}


def test_an_api_path_no_endpoint_matches_is_a_json_404_and_a_page_an_html_one(
    client: Client,
) -> None:
    for path in ("/api/v1/projects/1/calibration/a%0Ab", "/api/v1/nowhere"):
        answer = client.get(path)
        assert (answer.status_code, answer.json()) == (404, {"detail": "Not Found"}), path
    page = client.get("/nowhere/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")

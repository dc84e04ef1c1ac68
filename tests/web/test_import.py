"""Importing HoloDeck result files (the Import page and POST /api/v1/imports) and exporting a
run from its page (JSON, Markdown, JUnit XML)."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils.html import strip_tags

from runs.core.wire.holodeck_io import load_eval_runs
from runs.models import AgentProject, MetricRow, Run
from runs.services import history
from runs.services.tokens import token_create
from tests.web.factories import build_run

pytestmark = pytest.mark.django_db

IMPORT = "/import/"
API_IMPORTS = "/api/v1/imports"
UPLOAD_FORM = '<form method="post" enctype="multipart/form-data" class="card stack import-form"'


@pytest.fixture
def seed_path(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "holodeck" / "seed_runs.json"


@pytest.fixture
def seed_runs(seed_path: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(seed_path.read_text())
    return runs


@pytest.fixture
def staff_token(staff: User) -> dict[str, str]:
    _, secret = token_create(user=staff, name="ci")
    return {"Authorization": f"Bearer {secret}"}


def upload(name: str, content: bytes | str, content_type: str = "application/json") -> Any:
    data = content.encode() if isinstance(content, str) else content
    return SimpleUploadedFile(name, data, content_type=content_type)


def import_page(client: Client, *files: Any, project: AgentProject | None = None) -> Any:
    data = {"files": list(files), "project": project.pk if project else ""}
    return client.post(IMPORT, data)


def api_import(client: Client, headers: dict[str, str], *files: Any, project: object = "") -> Any:
    return client.post(API_IMPORTS, {"files": list(files), "project": project}, headers=headers)


def results_zip(runs: list[dict[str, Any]], extra: dict[str, bytes] | None = None) -> bytes:
    """A zipped results/ directory, one file per run in nested folders (as HoloDeck lays them
    out, plus a month folder), with the odd non-result file beside them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("results/README.txt", "not a result")
        archive.writestr("__MACOSX/results/._junk.json", b"\x00\x05\x16\x07")
        for index, run in enumerate(runs):
            month = run["report"]["timestamp"][:7]
            name = f"results/customer-support/{month}/run-{index:02}.json"
            archive.writestr(name, json.dumps(run, indent=2))
        for name, content in (extra or {}).items():
            archive.writestr(name, content)
    return buffer.getvalue()


def imported_runs() -> int:
    return Run.objects.filter(source=Run.Source.IMPORT).count()


# --- the Import page ----------------------------------------------------------------------------


def test_the_import_page_is_for_staff_only(client: Client, viewer_client: Client) -> None:
    assert viewer_client.get(IMPORT).status_code == 403
    assert viewer_client.post(IMPORT, {"files": [upload("a.json", "{}")]}).status_code == 403
    client.logout()
    assert client.get(IMPORT).status_code == 302  # to the login page


def test_staff_see_an_import_link_on_the_projects_page(staff_client: Client, viewer: User) -> None:
    assert f'href="{IMPORT}"' in staff_client.get(reverse("home")).text
    viewer_only = Client()
    viewer_only.force_login(viewer)
    assert f'href="{IMPORT}"' not in viewer_only.get(reverse("home")).text


def test_the_seed_history_imports_through_the_page_and_lists_its_24_runs(
    staff_client: Client, seed_path: Path, project: AgentProject
) -> None:
    response = import_page(staff_client, upload("seed_runs.json", seed_path.read_bytes()),
                           project=project)  # fmt: skip
    assert response.status_code == 200
    assert "Imported 24 runs" in response.text
    runs = Run.objects.filter(source=Run.Source.IMPORT)
    assert runs.count() == 24 and set(runs.values_list("project", flat=True)) == {project.pk}
    for run in runs:
        assert f'href="{reverse("run_detail", args=[run.pk])}"' in response.text
    assert UPLOAD_FORM in response.text  # to upload more


def test_importing_the_same_file_again_imports_nothing_and_says_so(
    staff_client: Client, seed_path: Path
) -> None:
    import_page(staff_client, upload("seed_runs.json", seed_path.read_bytes()))
    first = list(Run.objects.order_by("pk").values_list("pk", flat=True))
    response = import_page(staff_client, upload("seed_runs.json", seed_path.read_bytes()))
    assert response.status_code == 200
    assert "Imported 0 runs · 24 already imported" in response.text
    assert f"already imported as runs #{first[0]}, #{first[1]}" in strip_tags(response.text)
    assert imported_runs() == 24


def test_one_already_imported_run_is_named_as_the_run_holding_it(
    staff_client: Client, seed_runs: list[dict[str, Any]]
) -> None:
    import_page(staff_client, upload("one.json", json.dumps(seed_runs[3])))
    run = Run.objects.get()
    response = import_page(staff_client, upload("again.json", json.dumps(seed_runs[3])))
    assert f'already imported as run <a href="/runs/{run.pk}/"' in response.text


def test_a_zip_of_a_results_directory_imports_the_same_24_runs(
    staff_client: Client, seed_runs: list[dict[str, Any]], seed_path: Path
) -> None:
    archive = upload("results.zip", results_zip(seed_runs), "application/zip")
    response = import_page(staff_client, archive)
    assert response.status_code == 200, response.text
    assert "Imported 24 runs" in response.text
    assert "results.zip/results/customer-support/2026-03/run-00.json" in response.text
    assert "README.txt" not in response.text and "._junk" not in response.text
    # The very same results as the seed file: importing it now adds nothing.
    again = import_page(staff_client, upload("seed_runs.json", seed_path.read_bytes()))
    assert "Imported 0 runs · 24 already imported" in again.text
    assert imported_runs() == 24


def test_a_single_eval_run_and_a_bare_test_report_without_kinds_import(
    staff_client: Client, seed_runs: list[dict[str, Any]]
) -> None:
    legacy = copy.deepcopy(seed_runs[0]["report"])  # a bare TestReport from an older HoloDeck
    for result in legacy["results"]:
        for metric in result.get("metric_results") or []:
            metric.pop("kind", None)
    response = import_page(
        staff_client,
        upload("eval_run.json", json.dumps(seed_runs[1])),
        upload("old_report.json", json.dumps(legacy)),
    )
    assert "Imported 2 runs" in response.text
    old = Run.objects.get(report_timestamp=legacy["timestamp"])
    kinds = dict(MetricRow.objects.filter(run=old).values_list("metric_name", "kind"))
    assert kinds["tone_of_voice"] == "geval" and kinds["faithfulness"] == "rag"


def malformed_files() -> list[Any]:
    deep = "[" * 150 + "]" * 150
    return [
        upload("broken.json", '{"report": {"agent_name": '),
        upload("not_a_result.json", '{"hello": "world"}'),
        upload("deep.json", deep),
        upload("bad_field.json", '{"report": {"results": "nope"}, "metadata": {}}'),
    ]


def test_malformed_files_are_reported_by_name_and_the_others_still_import(
    staff_client: Client, seed_runs: list[dict[str, Any]]
) -> None:
    good = [upload(f"good-{i}.json", json.dumps(run)) for i, run in enumerate(seed_runs[:2])]
    response = import_page(staff_client, good[0], *malformed_files(), good[1])
    assert response.status_code == 200
    text = response.text
    assert "Imported 2 runs" in text and "4 files with errors" in text
    assert imported_runs() == 2
    rows = {name: row_of(text, name) for name in
            ("broken.json", "not_a_result.json", "deep.json", "bad_field.json")}  # fmt: skip
    assert "invalid JSON at line 1" in rows["broken.json"]
    assert "expected an EvalRun {report, metadata} or a TestReport" in rows["not_a_result.json"]
    assert "nested deeper than 100 levels" in rows["deep.json"]
    assert "report.results" in rows["bad_field.json"]


def row_of(page: str, name: str) -> str:
    start = page.index(f'<td class="mono small">{name}</td>')
    return page[start : page.index("</tr>", start)]


def test_an_upload_over_the_size_limit_gets_the_page_with_a_clear_message(
    staff_client: Client, seed_path: Path, settings: Any
) -> None:
    settings.HOLODECK_IMPORT_MAX_BYTES = 100_000
    response = import_page(staff_client, upload("seed_runs.json", seed_path.read_bytes()))
    assert response.status_code == 413
    assert "The upload is too large: 0.8 MB, at most 0.1 MB per upload" in response.text
    assert UPLOAD_FORM in response.text
    assert imported_runs() == 0


def test_too_many_files_in_one_upload_get_a_message_suggesting_a_zip(
    staff_client: Client, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    response = import_page(staff_client, *(upload(f"{i}.json", "{}") for i in range(3)))
    assert response.status_code == 413
    assert "Too many files in one upload (at most 2)" in response.text
    assert "upload a .zip of the results/ directory instead" in response.text


def test_posting_no_file_asks_for_one(staff_client: Client) -> None:
    response = staff_client.post(IMPORT, {"project": ""})
    assert response.status_code == 200
    assert "Choose at least one result file" in response.text


def test_the_import_form_needs_its_csrf_token(staff: User, seed_runs: list[dict[str, Any]]) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    response = browser.post(IMPORT, {"files": [upload("one.json", json.dumps(seed_runs[0]))]})
    assert response.status_code == 403
    assert imported_runs() == 0


@pytest.mark.parametrize(
    "member", ["../../etc/evil.json", "/tmp/evil.json", "results/../../evil.json", "C:/evil.json"]
)
def test_a_zip_with_an_absolute_or_dotdot_member_is_refused_whole(
    staff_client: Client, seed_runs: list[dict[str, Any]], member: str
) -> None:
    content = results_zip(seed_runs[:2], extra={member: json.dumps(seed_runs[2]).encode()})
    response = import_page(staff_client, upload("slip.zip", content, "application/zip"))
    assert response.status_code == 200
    assert "zip archive refused" in row_of(response.text, "slip.zip")
    assert "absolute or &#x27;..&#x27; path" in response.text
    assert imported_runs() == 0


def test_a_zip_bomb_is_refused_before_it_is_unpacked(
    staff_client: Client, seed_runs: list[dict[str, Any]], settings: Any
) -> None:
    settings.HOLODECK_IMPORT_MAX_BYTES = 200_000
    settings.HOLODECK_IMPORT_MAX_UNPACKED_BYTES = 1_000_000  # five times, as by default
    bomb = b" " * 5_000_000 + json.dumps(seed_runs[0]).encode()  # valid JSON, 5 MB unpacked
    content = results_zip([], extra={"results/bomb.json": bomb})
    assert len(content) < 50_000
    response = import_page(staff_client, upload("bomb.zip", content, "application/zip"))
    assert "zip archive refused: it unpacks to 5.0 MB (at most 1.0 MB, " in response.text
    assert "HOLODECK_IMPORT_MAX_UNPACKED_BYTES" in response.text
    assert imported_runs() == 0


def test_a_zip_with_too_many_members_is_refused(
    staff_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "ZIP_MAX_MEMBERS", 5)
    content = results_zip([], extra={f"results/{i}.json": b"{}" for i in range(6)})
    response = import_page(staff_client, upload("many.zip", content, "application/zip"))
    assert "zip archive refused: 8 members (at most 5)" in response.text


def test_a_broken_zip_and_an_empty_one_are_reported(staff_client: Client) -> None:
    response = import_page(
        staff_client,
        upload("broken.zip", b"PK\x03\x04 not really a zip", "application/zip"),
        upload("empty.zip", results_zip([]), "application/zip"),
    )
    assert "not a readable zip archive" in row_of(response.text, "broken.zip")
    assert "holds no *.json file" in row_of(response.text, "empty.zip")


def test_script_in_a_file_name_or_in_run_content_renders_as_text(
    staff_client: Client, seed_runs: list[dict[str, Any]]
) -> None:
    hostile = copy.deepcopy(seed_runs[0])
    hostile["report"]["agent_name"] = "<script>alert('agent')</script>"
    response = import_page(
        staff_client,
        upload("<script>alert('name').json", "not json"),  # Django keeps what follows a "/"
        upload("<b>ok</b>.json", json.dumps(hostile)),
    )
    assert response.status_code == 200
    assert "<script>alert" not in response.text
    assert "&lt;script&gt;alert(&#x27;name&#x27;).json" in response.text
    assert 'title="&lt;script&gt;alert(&#x27;agent&#x27;)&lt;/script&gt;"' in response.text
    run = Run.objects.get()
    page = staff_client.get(reverse("run_detail", args=[run.pk]))
    assert "<script>alert" not in page.text


def test_a_nul_character_in_a_result_is_never_a_500(
    staff_client: Client, seed_runs: list[dict[str, Any]]
) -> None:
    hostile = copy.deepcopy(seed_runs[0])
    hostile["report"]["results"][0]["agent_response"] = "before\x00after"
    response = import_page(staff_client, upload("nul.json", json.dumps(hostile)),
                           upload("good.json", json.dumps(seed_runs[1])))  # fmt: skip
    assert response.status_code == 200
    row = row_of(response.text, "nul.json")
    # SQLite stores it; PostgreSQL cannot, and the file says so while the other imports.
    assert "/runs/" in row or "a value the database cannot store" in row
    assert "/runs/" in row_of(response.text, "good.json")


# --- the API ------------------------------------------------------------------------------------


def test_the_api_imports_the_seed_history_and_then_reports_it_already_imported(
    client: Client, staff_token: dict[str, str], seed_path: Path, project: AgentProject
) -> None:
    response = api_import(client, staff_token, upload("seed_runs.json", seed_path.read_bytes()),
                          project=project.pk)  # fmt: skip
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["imported"] == 24 and body["already_imported"] == 0
    (file,) = body["files"]
    assert file["name"] == "seed_runs.json" and file["errors"] == []
    assert sorted(file["imported"]) == sorted(Run.objects.values_list("pk", flat=True))
    assert Run.objects.filter(project=project).count() == 24

    again = api_import(client, staff_token, upload("seed_runs.json", seed_path.read_bytes()))
    assert again.json()["imported"] == 0 and again.json()["already_imported"] == 24
    assert again.json()["files"][0]["already_imported"] == file["imported"]
    assert imported_runs() == 24


def test_the_api_imports_a_zip_and_reports_malformed_files_beside_it(
    client: Client, staff_token: dict[str, str], seed_runs: list[dict[str, Any]]
) -> None:
    archive = upload("results.zip", results_zip(seed_runs), "application/zip")
    response = api_import(client, staff_token, archive, *malformed_files())
    assert response.status_code == 200
    body = response.json()
    assert body["imported"] == 24
    errors = {f["name"]: f["errors"] for f in body["files"] if f["errors"]}
    assert set(errors) == {"broken.json", "not_a_result.json", "deep.json", "bad_field.json"}
    assert "nested deeper than 100 levels" in errors["deep.json"][0]
    assert len(body["files"]) == 24 + 4


def test_the_api_import_needs_a_token_and_staff(
    client: Client, viewer: User, seed_runs: list[dict[str, Any]]
) -> None:
    one = json.dumps(seed_runs[0])
    assert api_import(client, {}, upload("a.json", one)).status_code == 401
    _, secret = token_create(user=viewer, name="ci")
    response = api_import(client, {"Authorization": f"Bearer {secret}"}, upload("a.json", one))
    assert response.status_code == 403
    assert response.json() == {"detail": "Only staff can import results."}
    assert imported_runs() == 0


def test_the_api_refuses_an_oversized_upload_with_413_in_json(
    client: Client, staff_token: dict[str, str], seed_path: Path, settings: Any
) -> None:
    settings.HOLODECK_IMPORT_MAX_BYTES = 100_000
    response = api_import(client, staff_token, upload("seed_runs.json", seed_path.read_bytes()))
    assert response.status_code == 413
    assert "The upload is too large" in response.json()["detail"]
    assert imported_runs() == 0


@pytest.mark.parametrize("project", ["abc", "0", str(2**64), "999999"])
def test_the_api_refuses_a_bad_project_or_no_file_with_422(
    client: Client, staff_token: dict[str, str], seed_runs: list[dict[str, Any]], project: str
) -> None:
    response = api_import(client, staff_token, upload("a.json", json.dumps(seed_runs[0])),
                          project=project)  # fmt: skip
    assert response.status_code == 422 and response.json()["detail"]
    assert api_import(client, staff_token).status_code == 422
    assert imported_runs() == 0


def test_an_exported_run_imported_again_is_equal_and_not_duplicated(
    client: Client, staff_token: dict[str, str], seed_runs: list[dict[str, Any]]
) -> None:
    api_import(client, staff_token, upload("seed.json", json.dumps(seed_runs[5])))
    run = Run.objects.get()
    exported = client.get(f"/api/v1/runs/{run.pk}/export", {"format": "json"}, headers=staff_token)
    assert exported.status_code == 200
    (original,) = load_eval_runs(seed_runs[5])
    (round_trip,) = load_eval_runs(json.loads(exported.content))
    assert round_trip.report.results == original.report.results
    assert round_trip.metadata == original.metadata

    again = api_import(client, staff_token, upload("export.json", exported.content))
    assert again.json()["files"][0] == {
        "name": "export.json",
        "imported": [],
        "already_imported": [run.pk],
        "errors": [],
    }
    assert Run.objects.count() == 1


# --- export from the run page --------------------------------------------------------------------


def test_a_finished_run_page_links_its_json_markdown_and_junit_downloads(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    export = reverse("run_export", args=[run.pk])
    for href in (export, f"{export}?format=markdown", f"{export}?format=junit"):
        assert f'href="{href}" download' in page


def test_the_run_page_downloads_markdown_and_junit_xml(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    export = reverse("run_export", args=[run.pk])
    markdown = viewer_client.get(export, {"format": "markdown"})
    assert markdown.status_code == 200
    assert markdown["Content-Type"].startswith("text/markdown")
    assert f'filename="weather-agent-run-{run.pk}.md"' in markdown["Content-Disposition"]
    assert markdown.text.startswith("#") and "weather-agent" in markdown.text

    junit = viewer_client.get(export, {"format": "junit"})
    assert junit["Content-Type"] == "application/xml"
    assert f'filename="weather-agent-run-{run.pk}.xml"' in junit["Content-Disposition"]
    root = ElementTree.fromstring(junit.content)
    cases = root.iter("testcase")
    assert len(list(cases)) == run.total_cases
    assert len(list(root.iter("failure"))) >= 1

    as_json = viewer_client.get(export)
    assert as_json["Content-Type"] == "application/json"
    assert json.loads(as_json.content)["report"]["agent_name"] == "weather-agent"
    assert viewer_client.get(export, {"format": "pdf"}).status_code == 400

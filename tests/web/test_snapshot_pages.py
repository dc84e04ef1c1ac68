"""What a run ran, on the pages: the compare config diff of every file of two runs' snapshots,
and the run's "what ran" pages (file tree, one file, the zip) and their API."""

from __future__ import annotations

import io
import subprocess
import zipfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs.core.sealing import snapshot_working_tree
from runs.models import AgentProject, Run
from runs.services import launch
from runs.services.snapshots import snapshot_store
from runs.web.diffs import (
    MAX_DIFF_FILE_BYTES,
    MAX_DIFF_FILE_LINES,
    MAX_FILE_DIFF_LINES,
    file_diff,
    size_text,
)
from runs.web.snapshots import MAX_SHOWN_BYTES, MAX_SHOWN_LINES
from tests.web.factories import RunSpec, build_run
from tests.web.services_helpers import eager_celery, example_project, git

__all__ = ["eager_celery"]  # a fixture the tests below use

pytestmark = pytest.mark.django_db(transaction=True)

AssertQueries = Callable[[int], AbstractContextManager[object]]
API = "/api/v1"
PROMPT = "prompts/system.md"
OLD_LINE = (
    "- Answer with the number only. Ratios and changes may be given as a decimal (`0.1414`) or a"
)
NEW_LINE = (
    "- Answer in one sentence <script>alert('prompt')</script>, the number first. Ratios may be a"
)
# The config diff's queries: session, user, the two runs with their manifests, their archives,
# and the no-worker banner's look for a live worker (runs.web.context_processors).
CONFIG_DIFF_QUERIES = 5


@dataclass(frozen=True)
class PromptChange:
    """Runs at commit 2 and commit 3 of a repository where commit 3 changed only the prompt."""

    repo: Path
    second: str
    third: str
    before: Run
    after: Run


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


@pytest.fixture
def prompt_change(tmp_path: Path, eager_celery: None) -> PromptChange:
    """Commit 1: the example, with a .gitignore (scratch/ is never committed); commit 2: the
    README changed and a result file committed (results/ is never part of a snapshot); commit 3:
    one line of the prompt changed. A run is launched at commits 2 and 3."""
    project = example_project(tmp_path)
    repo = Path(project.directory)
    (repo / ".gitignore").write_text("scratch/\n*.log\n__pycache__/\n")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "notes.txt").write_text("ignored: not the agent's")
    (repo / "debug.log").write_text("ignored too")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nSecond commit.\n")
    (repo / "results").mkdir()
    (repo / "results" / "old.json").write_text("{}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two: README, and a result file by mistake")
    second = git(repo, "rev-parse", "HEAD")
    prompt = repo / PROMPT
    text = prompt.read_text()
    assert OLD_LINE in text
    prompt.write_text(text.replace(OLD_LINE, NEW_LINE))
    git(repo, "commit", "-qam", "three: the prompt only")
    third = git(repo, "rev-parse", "HEAD")
    before = launch.run_create(project=project, git_ref=second[:10], limit=1)
    after = launch.run_create(project=project, git_ref=third[:10], limit=1)
    before.refresh_from_db()
    after.refresh_from_db()
    assert not before.is_active and before.git_commit == second
    assert not after.is_active and after.git_commit == third
    return PromptChange(repo, second, third, before, after)


# --- the config diff ----------------------------------------------------------------------------


def test_the_config_diff_of_a_prompt_only_commit_shows_its_lines_and_every_other_file_identical(
    staff_client: Client, prompt_change: PromptChange, django_assert_max_num_queries: AssertQueries
) -> None:
    before, after = prompt_change.before, prompt_change.after
    with django_assert_max_num_queries(CONFIG_DIFF_QUERIES):
        response = staff_client.get(reverse("compare_config"), {"runs": f"{before.pk},{after.pk}"})
    assert response.status_code == 200
    files = response.context["files"]
    (diff,) = files.diffs
    assert (diff.path, diff.status, diff.added, diff.removed) == (PROMPT, "changed", 1, 1)
    assert [line.text for line in diff.lines if line.kind == "del"] == [f"-{OLD_LINE}"]
    assert [line.text for line in diff.lines if line.kind == "add"] == [f"+{NEW_LINE}"]
    assert files.identical == (
        ".gitignore",
        "README.md",
        "agent.yaml",
        "graders/program.py",
        "tools/finance.py",
        "transcript.yaml",
    )
    html = response.text
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    assert "1 file changed; 6 identical" in html
    assert "6 files identical:" in html and "agent.yaml, graders/program.py" in html
    assert "The same text in both runs" not in html  # the old agent.yaml-only diff is gone


def test_the_config_diff_of_one_snapshot_says_every_file_is_identical_without_reading_archives(
    viewer_client: Client,
    project: AgentProject,
    tmp_path: Path,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    one = run_with_files(project, tmp_path / "one", {"agent.yaml": b"name: a\n", "p.md": b"hi\n"})
    two = run_with_files(project, tmp_path / "two", {"agent.yaml": b"name: a\n", "p.md": b"hi\n"})
    assert one.snapshot_id == two.snapshot_id
    with django_assert_max_num_queries(CONFIG_DIFF_QUERIES - 1):
        response = viewer_client.get(reverse("compare_config"), {"runs": f"{one.pk},{two.pk}"})
    assert "Both runs ran the same snapshot: all 2 files identical." in response.text


def test_the_config_diff_lists_added_removed_binary_and_mode_changes_and_cuts_long_diffs(
    staff_client: Client,
    project: AgentProject,
    tmp_path: Path,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    long_before = "".join(f"line {n}\n" for n in range(1000)).encode()
    long_after = "".join(f"line {n} changed\n" for n in range(1000)).encode()
    old = run_with_files(
        project,
        tmp_path / "old",
        {
            "agent.yaml": b"name: a\n",
            "cases/gone.yaml": b"- input: bye\n",
            "data/table.bin": b"\x00\x01\x02",
            "tools/run.sh": b"echo hi\n",
            "notes/long.md": long_before,
        },
    )
    new = run_with_files(
        project,
        tmp_path / "new",
        {
            "agent.yaml": b"name: a\n",
            "cases/new.yaml": b"- input: hello\n",
            "data/table.bin": b"\x00\x01\x02\x03",
            "tools/run.sh": b"echo hi\n",
            "notes/long.md": long_after,
        },
        executable=("tools/run.sh",),
    )
    url = reverse("compare_config")
    with django_assert_max_num_queries(CONFIG_DIFF_QUERIES):  # whatever the number of files
        response = staff_client.get(url, {"runs": f"{old.pk},{new.pk}"})
    diffs = {diff.path: diff for diff in response.context["files"].diffs}
    assert {path: diff.status for path, diff in diffs.items()} == {
        "cases/gone.yaml": "removed",
        "cases/new.yaml": "added",
        "data/table.bin": "changed",
        "notes/long.md": "changed",
        "tools/run.sh": "changed",
    }
    assert [line.text for line in diffs["cases/new.yaml"].lines][-1] == "+- input: hello"
    assert [line.text for line in diffs["cases/gone.yaml"].lines][-1] == "-- input: bye"
    assert diffs["data/table.bin"].note == "binary, differs (3 bytes → 4 bytes)"
    assert diffs["tools/run.sh"].note == "mode 644 → 755" and not diffs["tools/run.sh"].lines
    long = diffs["notes/long.md"]
    assert len(long.lines) == MAX_FILE_DIFF_LINES and long.hidden > 0
    assert (long.added, long.removed) == (1000, 1000)
    assert "1 file identical:" in response.text and "show all" in response.text

    whole = staff_client.get(url, {"runs": f"{old.pk},{new.pk}", "full": "notes/long.md"})
    long = next(d for d in whole.context["files"].diffs if d.path == "notes/long.md")
    assert long.hidden == 0 and len(long.lines) > MAX_FILE_DIFF_LINES


def test_the_config_diff_says_too_large_for_files_over_its_limits_and_never_reads_the_largest(
    staff_client: Client,
    project: AgentProject,
    tmp_path: Path,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    # Over the byte limit, with scattered edits: difflib took minutes on such a pair.
    big_before = b"".join(b"row %d of a large generated file\n" % n for n in range(12_000))
    big_after = big_before.replace(b"row 7 of", b"row seven of").replace(b"row 9000", b"row x")
    assert len(big_before) > MAX_DIFF_FILE_BYTES
    # Under the byte limit, over the line limit.
    many_before = b"".join(b"%d\n" % n for n in range(MAX_DIFF_FILE_LINES + 1_000))
    many_after = many_before.replace(b"\n17\n", b"\nseventeen\n")
    assert len(many_after) < MAX_DIFF_FILE_BYTES
    old = run_with_files(
        project, tmp_path / "old", {"big.csv": big_before, "many.txt": many_before}
    )
    new = run_with_files(project, tmp_path / "new", {"big.csv": big_after, "many.txt": many_after})
    response = staff_client.get(reverse("compare_config"), {"runs": f"{old.pk},{new.pk}"})
    diffs = {diff.path: diff for diff in response.context["files"].diffs}
    big = f"{size_text(len(big_before))} → {size_text(len(big_after))}"
    assert diffs["big.csv"].note == f"too large to diff here: {big}; download both snapshots"
    many = (
        f"6,000 lines / {size_text(len(many_before))} → 6,000 lines / {size_text(len(many_after))}"
    )
    assert diffs["many.txt"].note == f"too large to diff here: {many}; download both snapshots"
    assert not diffs["big.csv"].lines and not diffs["many.txt"].lines
    assert "too large to diff here" in response.text

    only_big = run_with_files(project, tmp_path / "big", {"big.csv": big_after})
    first = run_with_files(project, tmp_path / "first", {"big.csv": big_before})
    with django_assert_max_num_queries(CONFIG_DIFF_QUERIES - 1):  # no archive read
        response = staff_client.get(
            reverse("compare_config"), {"runs": f"{first.pk},{only_big.pk}"}
        )
    assert "too large to diff here" in response.text


def test_the_config_diff_shows_a_viewer_which_files_differ_but_not_their_contents(
    viewer_client: Client, prompt_change: PromptChange, django_assert_max_num_queries: AssertQueries
) -> None:
    before, after = prompt_change.before, prompt_change.after
    with django_assert_max_num_queries(CONFIG_DIFF_QUERIES - 1):  # no archive read
        response = viewer_client.get(reverse("compare_config"), {"runs": f"{before.pk},{after.pk}"})
    (diff,) = response.context["files"].diffs
    assert (diff.path, diff.status, diff.lines) == (PROMPT, "changed", [])
    assert diff.note == "contents shown to staff only"
    html = response.text
    assert "1 file changed; 6 identical" in html and "contents shown to staff only" in html
    assert "alert" not in html and reverse("run_snapshot_file", args=[after.pk, PROMPT]) not in html


def test_a_run_without_a_snapshot_falls_back_to_the_agent_yaml_diff_and_says_why(
    viewer_client: Client, project: AgentProject, tmp_path: Path
) -> None:
    imported = build_run(project, RunSpec(cases=1, turns=1))
    Run.objects.filter(pk=imported.pk).update(raw_yaml="name: a\n")
    launched = run_with_files(project, tmp_path / "a", {"agent.yaml": b"name: b\n"})
    Run.objects.filter(pk=launched.pk).update(raw_yaml="name: b\n")
    response = viewer_client.get(
        reverse("compare_config"), {"runs": f"{imported.pk},{launched.pk}"}
    )
    assert response.status_code == 200 and "files" not in response.context
    html = response.text
    assert f"Run #{imported.pk} has no snapshot of its files" in html
    assert "only the agent.yaml texts are compared" in html
    assert "dl-add" in html and "+name: b" in html


# --- what ran -----------------------------------------------------------------------------------


def test_the_snapshot_zip_of_a_run_equals_its_commits_tree_without_ignored_files_and_results(
    staff_client: Client, prompt_change: PromptChange
) -> None:
    run, commit, repo = prompt_change.after, prompt_change.third, prompt_change.repo
    response = staff_client.get(reverse("run_snapshot_zip", args=[run.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert run.snapshot is not None
    short = run.snapshot.digest[:12]
    assert response["Content-Disposition"] == (
        f'attachment; filename="convfinqa-analyst-snapshot-{short}.zip"'
    )
    tree = git_bytes(repo, "ls-tree", "-r", "-z", "--name-only", commit).decode().split("\0")
    expected = sorted(path for path in tree if path and not path.startswith("results/"))
    assert "results/old.json" in tree  # committed, yet never part of a snapshot
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert sorted(archive.namelist()) == expected
        for path in expected:
            assert archive.read(path) == git_bytes(repo, "show", f"{commit}:{path}"), path
    assert "scratch/notes.txt" not in expected and "debug.log" not in expected  # ignored

    api = staff_client.get(f"{API}/runs/{run.pk}/snapshot.zip")
    assert api.status_code == 200 and api.content == response.content
    manifest = staff_client.get(f"{API}/runs/{run.pk}/snapshot").json()
    assert [row["path"] for row in manifest["files"]] == expected
    assert manifest["digest"] == run.snapshot.digest and manifest["file_count"] == len(expected)
    assert staff_client.get(manifest["zip_url"]).content == response.content


def test_a_working_tree_launch_leaves_the_ignored_files_on_disk_out_of_its_snapshot(
    staff_client: Client, prompt_change: PromptChange
) -> None:
    repo = prompt_change.repo
    assert (repo / "scratch" / "notes.txt").is_file() and (repo / "debug.log").is_file()
    project = AgentProject.objects.get(directory=str(repo))
    run = launch.run_create(project=project)  # no git ref: the working tree as it is

    response = staff_client.get(reverse("run_snapshot_zip", args=[run.pk]))
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        names = set(archive.namelist())
    assert "agent.yaml" in names and "prompts/system.md" in names
    assert not names & {"scratch/notes.txt", "debug.log", "results/old.json"}


def test_the_what_ran_page_shows_the_file_tree_and_a_file_as_escaped_numbered_text(
    staff_client: Client, prompt_change: PromptChange
) -> None:
    run = prompt_change.after
    detail = staff_client.get(reverse("run_detail", args=[run.pk]))
    assert reverse("run_snapshot", args=[run.pk]) in detail.text
    assert reverse("run_snapshot_zip", args=[run.pk]) in detail.text

    page = staff_client.get(reverse("run_snapshot", args=[run.pk]))
    assert page.status_code == 200
    rows = [(row.depth, row.name, row.file is not None) for row in page.context["tree"]]
    assert rows[:4] == [(0, ".gitignore", True), (0, "README.md", True), (0, "agent.yaml", True),
                        (0, "graders", False)]  # fmt: skip
    assert (1, "system.md", True) in rows
    assert reverse("run_snapshot_file", args=[run.pk, PROMPT]) in page.text

    shown = staff_client.get(reverse("run_snapshot_file", args=[run.pk, PROMPT]))
    assert shown.status_code == 200
    html = shown.text
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#x27;prompt&#x27;)" in html
    assert '<a href="#L1">1</a>' in html and 'id="L9"' in html
    raw = staff_client.get(reverse("run_snapshot_file", args=[run.pk, PROMPT]), {"download": "1"})
    assert raw["Content-Type"] == "application/octet-stream"
    assert raw.content == (prompt_change.repo / PROMPT).read_bytes()
    assert raw["Content-Disposition"] == 'attachment; filename="system.md"'


def test_a_viewer_sees_the_file_tree_but_gets_403_on_a_files_contents_and_the_zip(
    viewer_client: Client, prompt_change: PromptChange
) -> None:
    run = prompt_change.after
    detail = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert reverse("run_snapshot", args=[run.pk]) in detail
    assert reverse("run_snapshot_zip", args=[run.pk]) not in detail
    page = viewer_client.get(reverse("run_snapshot", args=[run.pk]))
    assert page.status_code == 200 and "system.md" in page.text
    assert "contents and the zip are for staff only" in page.text
    assert reverse("run_snapshot_file", args=[run.pk, PROMPT]) not in page.text
    assert reverse("run_snapshot_zip", args=[run.pk]) not in page.text
    file_url = reverse("run_snapshot_file", args=[run.pk, PROMPT])
    assert viewer_client.get(file_url).status_code == 403
    assert viewer_client.get(file_url, {"download": "1"}).status_code == 403
    assert viewer_client.get(reverse("run_snapshot_zip", args=[run.pk])).status_code == 403
    api_zip = viewer_client.get(f"{API}/runs/{run.pk}/snapshot.zip")
    assert api_zip.status_code == 403 and "Only staff" in api_zip.json()["detail"]
    manifest = viewer_client.get(f"{API}/runs/{run.pk}/snapshot")
    assert manifest.status_code == 200 and PROMPT in [f["path"] for f in manifest.json()["files"]]


def test_a_file_larger_than_the_page_shows_its_first_lines_and_says_so(
    staff_client: Client, project: AgentProject, tmp_path: Path
) -> None:
    wide = b"".join(b"%06d " % n + b"x" * 200 + b"\n" for n in range(4_000))  # ~800 KB
    many = b"".join(b"%d\n" % n for n in range(MAX_SHOWN_LINES * 2))
    assert len(wide) > MAX_SHOWN_BYTES
    run = run_with_files(project, tmp_path / "w", {"wide.txt": wide, "many.txt": many})
    response = staff_client.get(reverse("run_snapshot_file", args=[run.pk, "wide.txt"]))
    shown = response.context["shown_count"]
    assert 0 < shown < 4_000 and response.context["cut"]
    assert f"The first {shown:,} lines of {len(wide):,} bytes: download the file" in response.text
    assert response.text.count("<tr id=") == shown
    response = staff_client.get(reverse("run_snapshot_file", args=[run.pk, "many.txt"]))
    assert response.context["shown_count"] == MAX_SHOWN_LINES and response.context["cut"]
    assert f"The first 5,000 lines of {len(many):,} bytes" in response.text
    whole = staff_client.get(
        reverse("run_snapshot_file", args=[run.pk, "many.txt"]), {"download": "1"}
    )
    assert whole.content == many


def test_a_binary_file_shows_its_size_and_a_download_only(
    staff_client: Client, project: AgentProject, tmp_path: Path
) -> None:
    run = run_with_files(project, tmp_path / "b", {"agent.yaml": b"name: a\n", "x.bin": b"\0\1"})
    response = staff_client.get(reverse("run_snapshot_file", args=[run.pk, "x.bin"]))
    assert response.context["binary"] and "A binary file (2 bytes)" in response.text
    assert "source-lines" not in response.text


@pytest.mark.parametrize(
    "path",
    ["nope.md", "scratch/notes.txt", "results/old.json", "../agent.yaml", "prompts/../agent.yaml",
     "prompts", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd"],
)  # fmt: skip
def test_only_the_paths_of_the_manifest_are_served(
    staff_client: Client, project: AgentProject, tmp_path: Path, path: str
) -> None:
    run = run_with_files(
        project, tmp_path / "c", {"agent.yaml": b"name: a\n", "prompts/system.md": b"hi\n"}
    )
    url = reverse("run_snapshot", args=[run.pk]) + path
    assert staff_client.get(url).status_code == 404


def test_a_run_without_a_snapshot_says_so_and_has_no_zip(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1))
    page = staff_client.get(reverse("run_snapshot", args=[run.pk]))
    assert page.status_code == 200 and "has no snapshot of its files" in page.text
    assert (
        reverse("run_snapshot", args=[run.pk])
        not in staff_client.get(reverse("run_detail", args=[run.pk])).text
    )
    assert staff_client.get(reverse("run_snapshot_zip", args=[run.pk])).status_code == 404
    file_url = reverse("run_snapshot_file", args=[run.pk, "agent.yaml"])
    assert staff_client.get(file_url).status_code == 404
    api = staff_client.get(f"{API}/runs/{run.pk}/snapshot")
    assert api.status_code == 404 and "has no snapshot" in api.json()["detail"]
    assert staff_client.get(f"{API}/runs/{run.pk}/snapshot.zip").status_code == 404
    assert staff_client.get(f"{API}/runs/999999/snapshot").status_code == 404


def test_the_snapshot_pages_are_for_logged_in_users_only(
    client: Client, project: AgentProject, tmp_path: Path
) -> None:
    run = run_with_files(project, tmp_path / "d", {"agent.yaml": b"name: a\n"})
    for url in (
        reverse("run_snapshot", args=[run.pk]),
        reverse("run_snapshot_file", args=[run.pk, "agent.yaml"]),
        reverse("run_snapshot_zip", args=[run.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    assert client.get(f"{API}/runs/{run.pk}/snapshot").status_code == 401
    assert client.get(f"{API}/runs/{run.pk}/snapshot.zip").status_code == 401


# --- one file's diff ------------------------------------------------------------------------------


def test_a_file_diff_says_binary_with_the_sizes_and_an_empty_file_as_empty() -> None:
    labels = ("a (run #1)", "a (run #2)")
    assert file_diff("a", b"\xff\xfe", b"text", labels=labels).note == (
        "binary, differs (2 bytes → 4 bytes)"
    )
    assert file_diff("a", None, b"", labels=labels).note == "empty file"
    added = file_diff("a", None, b"one\ntwo\n", labels=labels)
    assert added.status == "added" and (added.added, added.removed) == (2, 0)
    assert added.lines[0].text == "--- /dev/null"


# --- helpers ------------------------------------------------------------------------------------


def run_with_files(
    project: AgentProject,
    directory: Path,
    files: dict[str, bytes],
    *,
    executable: tuple[str, ...] = (),
) -> Run:
    """A stored run whose snapshot holds ``files`` (a directory outside git, snapshotted)."""
    for path, data in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if path in executable else 0o644)
    snapshot = snapshot_store(packed=snapshot_working_tree(directory))
    run = build_run(project, RunSpec(cases=1, turns=1))
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    run.refresh_from_db()
    return run


def test_tool_calls_whose_args_were_kept_as_text_are_compared_whole() -> None:
    from runs.web.diffs import tool_call_diff

    cut = {"name": "lookup", "args": '{"table": "net rev', "result": 1}
    whole = {"name": "lookup", "args": {"table": "net revenue"}, "result": 1}

    assert tool_call_diff([cut], [whole])[0].changes == ["args"]
    assert tool_call_diff([cut], [dict(cut)])[0].changes == []
    assert tool_call_diff([cut], [{**cut, "result": 2}])[0].changes == ["result"]

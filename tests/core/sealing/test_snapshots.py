"""Sealed agent snapshots (runs/core/sealing/): what goes in, the digest, limits, the archive and
the local cache. No Django, no database."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from runs.core.sealing import (
    MARKER_SUFFIX,
    PackedSnapshot,
    SnapshotError,
    SnapshotLimits,
    snapshot_agent,
    snapshot_commit,
    snapshot_diff,
    snapshot_working_tree,
    unpack,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "convfinqa"


def git(directory: Path, *args: str) -> str:
    """Run git in ``directory`` with a throwaway identity; its output."""
    return subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def write(base: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


AGENT = {
    "agent.yaml": "name: demo\ninstructions: {file: prompts/system.md}\n",
    "prompts/system.md": "You answer questions.\n",
    "tools/calc.py": "def add(a, b):\n    return a + b\n",
    "cases/one.yaml": "- input: hi\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose agent lives in ``agent/``, one commit, .gitignore'd files present."""
    root = tmp_path / "repo"
    write(root / "agent", AGENT)
    write(root, {".gitignore": "*.log\nsecrets/\n", "README.md": "outside the agent\n"})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    write(root / "agent", {"debug.log": "noise", "secrets/key.txt": "k", "results/r.json": "{}"})
    return root


def paths(packed: PackedSnapshot) -> list[str]:
    return [f.path for f in packed.snapshot.files]


def zip_of(entries: list[tuple[str, bytes, int]], digest: str | None = None) -> bytes:
    """A hand-made archive in the snapshot's layout (entry comment = sha256), to tamper with."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        if digest is not None:
            archive.comment = f"holodeck-snapshot/1 {digest}".encode()
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.comment = hashlib.sha256(data).hexdigest().encode()
            archive.writestr(info, data)
    return buffer.getvalue()


def test_the_snapshot_module_imports_no_django() -> None:
    code = (
        "import sys, runs.core.sealing; "
        "print(any(m.split('.')[0] == 'django' for m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=EXAMPLE.parents[1],
        env=env,
        capture_output=True,
        text=True,
    )

    assert done.stdout.strip() == "False", done.stderr


# --- what goes in -------------------------------------------------------------------------------


def test_the_working_tree_snapshot_leaves_out_ignored_files_and_results(repo: Path) -> None:
    write(repo / "agent", {"notes.md": "untracked, not ignored\n", "tools/__pycache__/c.pyc": "x"})

    packed = snapshot_working_tree(repo / "agent")

    assert paths(packed) == [
        "agent.yaml",
        "cases/one.yaml",
        "notes.md",
        "prompts/system.md",
        "tools/calc.py",
    ]
    assert packed.read("prompts/system.md") == b"You answer questions.\n"


def test_the_working_tree_snapshot_skips_a_tracked_file_deleted_from_the_disk(repo: Path) -> None:
    (repo / "agent" / "cases" / "one.yaml").unlink()

    assert "cases/one.yaml" not in paths(snapshot_working_tree(repo / "agent"))


def test_a_commit_snapshot_holds_that_commit_not_the_working_tree(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    write(repo / "agent", {"prompts/system.md": "You answer briefly.\n", "extra.md": "new\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")
    write(repo / "agent", {"prompts/system.md": "uncommitted edit\n"})

    old = snapshot_commit(repo / "agent", first)
    new = snapshot_commit(repo / "agent", "main")

    assert paths(old) == ["agent.yaml", "cases/one.yaml", "prompts/system.md", "tools/calc.py"]
    assert old.read("prompts/system.md") == b"You answer questions.\n"
    assert new.read("prompts/system.md") == b"You answer briefly.\n"
    assert "extra.md" in paths(new)
    diff = snapshot_diff(old.snapshot, new.snapshot)
    assert diff.changed == ("prompts/system.md",)
    assert diff.added == ("extra.md",)
    assert diff.removed == ()
    assert diff.identical == ("agent.yaml", "cases/one.yaml", "tools/calc.py")


def test_a_clean_working_tree_and_its_commit_give_the_same_snapshot(repo: Path) -> None:
    (repo / "agent" / "tools" / "calc.py").chmod(0o755)
    git(repo, "commit", "-q", "-am", "executable")

    tree = snapshot_working_tree(repo / "agent")
    commit = snapshot_commit(repo / "agent", "HEAD")

    assert tree.digest == commit.digest
    assert tree.to_zip() == commit.to_zip()
    assert commit.snapshot.file("tools/calc.py").mode == 0o755  # type: ignore[union-attr]


def test_a_commit_snapshot_leaves_out_a_committed_results_folder(repo: Path) -> None:
    git(repo, "add", "-f", "agent/results/r.json")
    git(repo, "commit", "-q", "-m", "results committed by mistake")

    assert not any(p.startswith("results/") for p in paths(snapshot_commit(repo / "agent", "HEAD")))


def test_an_unknown_commit_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(SnapshotError, match="not a commit"):
        snapshot_commit(repo / "agent", "no-such-ref")


def test_outside_git_the_agent_directorys_gitignore_and_caches_are_left_out(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent"
    write(agent, AGENT)
    write(
        agent,
        {
            ".gitignore": "data/\n*.tmp\n!keep.tmp\n",
            "data/big.csv": "1,2\n",
            "x.tmp": "",
            "keep.tmp": "kept\n",
            "results/run.json": "{}",
            "sub/results/kept.txt": "only the top-level results/ is left out\n",
            "tools/__pycache__/calc.cpython-312.pyc": "x",
            ".holodeck/state": "x",
            ".git/HEAD": "x",
        },
    )

    assert paths(snapshot_agent(agent)) == [
        ".gitignore",
        "agent.yaml",
        "cases/one.yaml",
        "keep.tmp",
        "prompts/system.md",
        "sub/results/kept.txt",
        "tools/calc.py",
    ]


def test_a_symlink_inside_the_agent_directory_is_followed(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent, AGENT)
    (agent / "prompt.md").symlink_to("prompts/system.md")
    (agent / "more_tools").symlink_to("tools")

    packed = snapshot_working_tree(agent)

    assert packed.read("prompt.md") == b"You answer questions.\n"
    assert packed.read("more_tools/calc.py") == (agent / "tools" / "calc.py").read_bytes()


def test_a_symlink_leaving_the_agent_directory_is_refused(repo: Path) -> None:
    (repo / "agent" / "readme.md").symlink_to("../README.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link out")

    with pytest.raises(SnapshotError, match=r"readme\.md is a symlink .*outside the agent"):
        snapshot_working_tree(repo / "agent")
    with pytest.raises(SnapshotError, match=r"readme\.md is a symlink .*outside the agent"):
        snapshot_commit(repo / "agent", "HEAD")


def test_committed_symlinks_inside_the_agent_are_followed(repo: Path) -> None:
    (repo / "agent" / "prompt.md").symlink_to("prompts/system.md")
    (repo / "agent" / "more_tools").symlink_to("tools")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")

    packed = snapshot_commit(repo / "agent", "HEAD")

    assert packed.read("prompt.md") == b"You answer questions.\n"
    assert "more_tools/calc.py" in paths(packed)
    assert packed.digest == snapshot_working_tree(repo / "agent").digest


def test_a_symlink_looping_back_to_its_own_folder_is_refused(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent, AGENT)
    (agent / "tools" / "again").symlink_to("..")

    with pytest.raises(SnapshotError, match="loops"):
        snapshot_working_tree(agent)


# --- the digest ---------------------------------------------------------------------------------


def test_the_same_files_give_the_same_digest_whatever_their_timestamps(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    write(first, AGENT)
    write(second, dict(reversed(AGENT.items())))
    for path in second.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))

    assert snapshot_working_tree(first).digest == snapshot_working_tree(second).digest
    assert snapshot_working_tree(first).to_zip() == snapshot_working_tree(second).to_zip()


def test_one_changed_byte_or_executable_bit_gives_a_new_digest(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent, AGENT)
    before = snapshot_working_tree(agent).digest

    (agent / "prompts" / "system.md").write_text("You answer questions!\n")
    changed = snapshot_working_tree(agent).digest
    (agent / "tools" / "calc.py").chmod(0o755)
    executable = snapshot_working_tree(agent).digest

    assert len({before, changed, executable}) == 3


# --- limits -------------------------------------------------------------------------------------


def test_too_many_files_names_the_first_one_over_and_says_how_to_leave_files_out(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent"
    write(agent, AGENT)

    with pytest.raises(SnapshotError) as caught:
        snapshot_working_tree(agent, limits=SnapshotLimits(max_files=3))

    message = str(caught.value)
    assert message.startswith("tools/calc.py: the agent directory has more than 3 files")
    assert ".gitignore" in message


def test_a_file_over_the_size_limit_is_named_with_the_limit(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent, {**AGENT, "data/table.csv": "x" * 3000})

    with pytest.raises(SnapshotError, match=r"^data/table\.csv is 2\.9 KB, over the .* 2 KB per"):
        snapshot_working_tree(agent, limits=SnapshotLimits(max_file_bytes=2048))


def test_the_total_size_limit_names_the_file_that_reaches_it(repo: Path) -> None:
    limits = SnapshotLimits(max_total_bytes=80)  # agent.yaml 51 + cases 12 + prompt 22

    with pytest.raises(
        SnapshotError, match=r"^prompts/system\.md: .* reaches 85 bytes, over the limit of 80 bytes"
    ):
        snapshot_commit(repo / "agent", "HEAD", limits=limits)
    with pytest.raises(SnapshotError, match=r"^prompts/system\.md: .*\.gitignore"):
        snapshot_working_tree(repo / "agent", limits=limits)


def test_a_directory_with_nothing_to_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "agent", {".gitignore": "*\n"})

    with pytest.raises(SnapshotError, match="no files to snapshot"):
        snapshot_working_tree(tmp_path / "agent")


# --- the archive --------------------------------------------------------------------------------


def test_an_archive_reads_back_as_the_same_snapshot(tmp_path: Path) -> None:
    write(tmp_path / "agent", AGENT)
    (tmp_path / "agent" / "tools" / "calc.py").chmod(0o755)
    packed = snapshot_working_tree(tmp_path / "agent")

    again = PackedSnapshot.from_zip(packed.to_zip(), expected_digest=packed.digest)

    assert again.snapshot == packed.snapshot
    assert dict(again.contents) == dict(packed.contents)
    assert again.to_zip() == packed.to_zip()


def test_the_example_agent_round_trips_through_its_archive() -> None:
    packed = snapshot_working_tree(EXAMPLE)

    assert {"agent.yaml", "prompts/system.md", "tools/finance.py"} <= set(paths(packed))
    assert PackedSnapshot.from_zip(packed.to_zip()).digest == packed.digest


def test_a_tampered_archive_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "agent", AGENT)
    packed = snapshot_working_tree(tmp_path / "agent")
    entries = [(f.path, packed.read(f.path), f.mode) for f in packed.snapshot.files]
    edited = [(p, b"rm -rf /\n" if p == "tools/calc.py" else d, m) for p, d, m in entries]
    raw = bytearray(packed.to_zip())
    first = zipfile.ZipFile(io.BytesIO(raw)).infolist()[0]
    raw[first.header_offset + 30 + len(first.filename) + 1] ^= 1  # a bit of its deflated data

    with pytest.raises(SnapshotError, match="does not match its files"):
        PackedSnapshot.from_zip(zip_of(edited, packed.digest))  # consistent hashes, old digest
    with pytest.raises(SnapshotError, match="not the expected"):
        PackedSnapshot.from_zip(packed.to_zip(), expected_digest="0" * 64)
    with pytest.raises(SnapshotError):
        PackedSnapshot.from_zip(bytes(raw))
    with pytest.raises(SnapshotError, match="not a sound snapshot archive"):
        PackedSnapshot.from_zip(b"not a zip")


def test_an_entry_whose_content_does_not_match_its_hash_is_named(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("agent.yaml")
        info.comment = hashlib.sha256(b"name: a\n").hexdigest().encode()
        archive.writestr(info, b"name: b\n")

    with pytest.raises(SnapshotError, match=r"^agent\.yaml: its content does not match"):
        PackedSnapshot.from_zip(buffer.getvalue())


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize(
    "names, message",
    [
        (["../evil.py"], "not a safe relative path"),
        (["/etc/passwd"], "not a safe relative path"),
        (["tools/../../evil.py"], "not a safe relative path"),
        (["tools\\..\\evil.py"], "not a safe relative path"),
        (["agent.yaml", "agent.yaml"], "holds agent.yaml twice"),
        (["tools", "tools/calc.py"], "both as a file and a folder"),
    ],
)
def test_an_archive_with_unsafe_paths_is_refused(names: list[str], message: str) -> None:
    data = zip_of([(name, b"x\n", 0o644) for name in names])

    with pytest.raises(SnapshotError, match=message):
        PackedSnapshot.from_zip(data)


def test_an_archive_over_the_limits_is_refused_before_it_is_inflated() -> None:
    data = zip_of([("big.txt", b"\0" * 100_000, 0o644)])

    with pytest.raises(SnapshotError, match=r"big\.txt is 97\.7 KB"):
        PackedSnapshot.from_zip(data, limits=SnapshotLimits(max_file_bytes=1024))


# --- the local cache ----------------------------------------------------------------------------


@pytest.fixture
def archive(tmp_path: Path) -> PackedSnapshot:
    write(tmp_path / "agent", AGENT)
    (tmp_path / "agent" / "tools" / "calc.py").chmod(0o755)
    return snapshot_working_tree(tmp_path / "agent")


def test_unpack_extracts_the_files_with_their_executable_bit(
    archive: PackedSnapshot, tmp_path: Path
) -> None:
    directory = unpack(archive.to_zip(), archive.digest, tmp_path / "cache")

    assert directory == tmp_path / "cache" / archive.digest
    assert (directory / "prompts" / "system.md").read_text() == "You answer questions.\n"
    assert (directory / "tools" / "calc.py").stat().st_mode & 0o777 == 0o755
    assert (directory / "agent.yaml").stat().st_mode & 0o777 == 0o644
    assert snapshot_working_tree(directory).digest == archive.digest
    assert (tmp_path / "cache" / f"{archive.digest}{MARKER_SUFFIX}").is_file()


def test_a_second_unpack_returns_the_folder_without_extracting(
    archive: PackedSnapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = archive.to_zip()
    first = unpack(data, archive.digest, tmp_path / "cache")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("extracted a second time")

    monkeypatch.setattr(PackedSnapshot, "from_zip", refuse)
    assert unpack(data, archive.digest, tmp_path / "cache") == first


def test_two_threads_unpacking_at_once_share_one_complete_folder(
    archive: PackedSnapshot, tmp_path: Path
) -> None:
    data, cache = archive.to_zip(), tmp_path / "cache"
    start = threading.Barrier(4)
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        start.wait()
        try:
            results.append(unpack(data, archive.digest, cache))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert set(results) == {cache / archive.digest}
    assert snapshot_working_tree(cache / archive.digest).digest == archive.digest
    assert sorted(p.name for p in cache.iterdir()) == [
        archive.digest,
        f"{archive.digest}{MARKER_SUFFIX}",
    ]


def test_an_unmarked_complete_folder_is_kept_and_a_damaged_one_replaced(
    archive: PackedSnapshot, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    directory = unpack(archive.to_zip(), archive.digest, cache)
    marker = cache / f"{archive.digest}{MARKER_SUFFIX}"
    marker.unlink()  # as if the process died between the rename and the marker
    kept = (directory / "agent.yaml").stat().st_ino

    assert unpack(archive.to_zip(), archive.digest, cache) == directory
    assert (directory / "agent.yaml").stat().st_ino == kept

    marker.unlink()
    (directory / "prompts" / "system.md").write_text("edited by hand\n")
    unpack(archive.to_zip(), archive.digest, cache)

    assert (directory / "prompts" / "system.md").read_text() == "You answer questions.\n"
    assert sorted(p.name for p in cache.iterdir()) == [archive.digest, marker.name]


def test_unpack_refuses_an_archive_of_another_digest_and_a_digest_that_is_a_path(
    archive: PackedSnapshot, tmp_path: Path
) -> None:
    with pytest.raises(SnapshotError, match="not the expected"):
        unpack(archive.to_zip(), "a" * 64, tmp_path / "cache")
    with pytest.raises(SnapshotError, match="is not a snapshot digest"):
        unpack(archive.to_zip(), "../" + archive.digest[3:], tmp_path / "cache")
    assert not (tmp_path / "cache" / ("a" * 64)).exists()


def test_a_run_from_the_cache_does_not_depend_on_the_original_folder(
    archive: PackedSnapshot, tmp_path: Path
) -> None:
    data = archive.to_zip()
    shutil.rmtree(tmp_path / "agent")

    directory = unpack(data, archive.digest, tmp_path / "elsewhere" / "cache")

    assert (directory / "agent.yaml").read_text() == AGENT["agent.yaml"]

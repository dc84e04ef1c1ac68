"""Git facts about an agent directory, and temporary worktrees to run any commit.

Django-free. Every git command of the project runs through ``git`` here (the sealed snapshots'
too: ``runs.core.sealing``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Temporary worktrees are named after the process that made them, so a later process can tell
# the leftovers of a killed one from the checkouts of a live one.
WORKTREE_PREFIX = "holodeck-worktree-"


class GitError(Exception):
    pass


# What the dirty check ignores (git pathspecs, relative to the agent directory).
NOT_DIRTYING = (
    ":(exclude)results/",
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
)


@dataclass(frozen=True)
class GitInfo:
    root: Path
    commit: str
    branch: str
    dirty: bool


# Seconds a git command may take (reading a big commit's blobs may pass a longer one).
GIT_TIMEOUT = 30


def git(
    directory: Path, *args: str, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT
) -> bytes:
    """git's raw output in ``directory`` (file names may hold any byte but NUL: no decoding,
    no strip). GitError with git's own complaint when it fails, or why it could not run."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {' '.join(args)} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise GitError(message or f"git {' '.join(args)} failed")
    return done.stdout


def _git(directory: Path, *args: str) -> str:
    """git's output as text (UTF-8 whatever the locale), stripped."""
    return git(directory, *args).decode("utf-8", "replace").strip()


def git_info(directory: Path) -> GitInfo | None:
    """Commit, branch and dirty flag of the repository holding ``directory`` (None: not in git)."""
    try:
        root = Path(_git(directory, "rev-parse", "--show-toplevel"))
        commit = _git(directory, "rev-parse", "HEAD")
    except GitError:
        return None
    try:
        branch = _git(directory, "rev-parse", "--abbrev-ref", "HEAD")
    except GitError:
        branch = ""
    # HoloDeck's CLI writes results/ beside agent.yaml, and loading the agent's tools and
    # graders writes Python's bytecode caches: neither changes anything that runs.
    dirty = bool(_git(directory, "status", "--porcelain", "--", ".", *NOT_DIRTYING))
    return GitInfo(root, commit, "" if branch == "HEAD" else branch, dirty)


# The branches a commit on several is named by, after the ref launched and the checkout's own.
MAIN_BRANCHES = ("main", "master")


def branch_of(directory: Path, commit: str, *, ref: str = "", current: str = "") -> str:
    """The local branch ``commit`` is on, for a run launched at a commit (a sha, a tag, a ref
    like ``main~2``): ``ref`` itself when it is a branch holding it, else the checkout's
    ``current`` branch, ``main`` or ``master`` when they hold it, else the first branch that
    does; "" when no branch holds it (or on any git error). One ``git for-each-ref``."""
    if not commit or commit.startswith("-"):
        return ""
    try:
        listing = _git(
            directory,
            "for-each-ref",
            f"--contains={commit}",
            "--format=%(refname:short)",
            "refs/heads/",
        )
    except GitError:
        return ""
    branches = listing.split()
    for name in (ref, current, *MAIN_BRANCHES):
        if name and name in branches:
            return name
    return branches[0] if branches else ""


# Run.git_subject's length: a longer subject is cut there.
MAX_SUBJECT = 300


def commit_subject(directory: Path, commit: str) -> str:
    """The subject (the first line of the message) of ``commit`` in ``directory``'s repository,
    at most MAX_SUBJECT characters; "" on any error (no repository, a commit git does not
    know). One ``git log``, read as UTF-8 whatever the locale."""
    if not commit or commit.startswith("-") or not directory.is_dir():
        return ""
    try:
        subject = _git(directory, "log", "-1", "--format=%s", commit, "--")
    except GitError:
        return ""
    return subject.replace("\x00", "")[:MAX_SUBJECT]


def resolve_commit(directory: Path, ref: str) -> str:
    if not ref or ref.startswith("-"):
        raise GitError(f"invalid git ref {ref!r}")
    try:
        return _git(directory, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        raise GitError(f"git ref {ref!r} is not a commit of the project's repository") from None


@contextlib.contextmanager
def checkout(directory: Path, commit: str | None) -> Iterator[Path]:
    """The agent directory as of ``commit`` (a temporary detached worktree), or as it is now."""
    if not commit:
        yield directory
        return
    root = Path(_git(directory, "rev-parse", "--show-toplevel"))
    relative = directory.resolve().relative_to(root.resolve())
    tmp = Path(tempfile.mkdtemp(prefix=f"{WORKTREE_PREFIX}{os.getpid()}-"))
    worktree = tmp / "tree"
    _git(root, "worktree", "add", "--detach", "--quiet", str(worktree), commit)
    try:
        yield worktree / relative
    finally:
        with contextlib.suppress(GitError):
            _git(root, "worktree", "remove", "--force", str(worktree))
        shutil.rmtree(tmp, ignore_errors=True)


def worktrees_prune(directory: Path) -> int:
    """Remove the temporary worktrees that killed processes left in ``directory``'s repository
    (and git's records of vanished ones); the number removed."""
    try:
        listing = _git(directory, "worktree", "list", "--porcelain")
    except GitError:
        return 0
    removed = 0
    for line in listing.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line.removeprefix("worktree "))
        owner = _worktree_owner(path)
        if owner is None or _process_alive(owner):
            continue
        with contextlib.suppress(GitError):
            _git(directory, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path.parent, ignore_errors=True)
        removed += 1
    with contextlib.suppress(GitError):
        _git(directory, "worktree", "prune")
    return removed


def _worktree_owner(path: Path) -> int | None:
    """The pid in ``<tmp>/holodeck-worktree-<pid>-<random>/tree``, if it is one of ours."""
    name = path.parent.name
    if path.name != "tree" or not name.startswith(WORKTREE_PREFIX):
        return None
    pid = name.removeprefix(WORKTREE_PREFIX).split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parent_commit(directory: Path, commit: str) -> str | None:
    """The first parent of ``commit`` in ``directory``'s repository (None: no parent, no repo,
    or a commit git does not know, e.g. an imported run's)."""
    if not commit or commit.startswith("-") or not directory.is_dir():
        return None
    try:
        return _git(directory, "rev-parse", "--verify", "--quiet", f"{commit}^1^{{commit}}")
    except GitError:
        return None


def commit_order(directory: Path, branch: str = "") -> list[str]:
    """The first-parent history of ``branch`` (HEAD when empty) in ``directory``'s repository,
    oldest first. Raises GitError when it is not a repository or the branch is unknown."""
    ref = branch or "HEAD"
    if ref.startswith("-"):
        raise GitError(f"invalid branch {branch!r}")
    return _git(directory, "rev-list", "--first-parent", "--reverse", ref, "--").split()

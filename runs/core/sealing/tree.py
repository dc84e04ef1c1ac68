"""The files of an agent directory as a run runs it: the working tree as it is now, or the tree
of a commit read from git's objects (the working tree is not touched).

- In a git repository the working-tree snapshot takes the files git would (tracked files, and
  untracked ones not ignored by ``.gitignore``, without caches); outside git every file except
  caches and what the agent directory's own ``.gitignore`` names (only that one: nested ones are
  git's business). The commit snapshot takes the tree of that commit.
- The top-level ``results/`` folder is always left out: runs write there.
- A symlink that stays inside the agent directory is followed (its target's content is stored
  under the link's path); one that leaves it is refused, since the snapshot must hold all the
  agent reads.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pathspec

from runs.core.gitutil import GitError, git, resolve_commit
from runs.core.sealing.pack import (
    DEFAULT_LIMITS,
    PackedSnapshot,
    Packer,
    SnapshotError,
    SnapshotLimits,
)

RESULTS_DIR = "results"
# Left out of untracked files (and of everything outside git): caches and local state that
# change when the agent runs, and would change the digest of an unchanged agent.
JUNK_DIRS = frozenset({".git", "__pycache__", ".holodeck", ".venv", "venv", "node_modules"})
JUNK_SUFFIXES = (".pyc",)
_MAX_LINK_HOPS = 40
# Listing a big tree, or reading its blobs in one ``git cat-file``, may take longer than git's
# usual timeout.
_GIT_TIMEOUT = 120

Ignored = Callable[[str, bool], bool]


# --- snapshots of a directory -------------------------------------------------------------------


def snapshot_working_tree(
    agent_dir: Path, *, limits: SnapshotLimits = DEFAULT_LIMITS
) -> PackedSnapshot:
    """The agent directory as it is now (what a launch without a commit runs)."""
    root = _agent_root(agent_dir)
    packer = Packer(limits)
    listed = _git_listing(root)
    if listed is None:
        ignored = _ignore_rules(root)
        _walk(packer, root, "", root, ignored, frozenset({root}))
    else:
        for rel in listed:
            _add_listed(packer, root, rel)
    return packer.finish(f"{agent_dir}")


def snapshot_commit(
    agent_dir: Path, commit: str, *, limits: SnapshotLimits = DEFAULT_LIMITS
) -> PackedSnapshot:
    """The agent directory as of ``commit`` of its repository (it may be a subdirectory of the
    repository), read from git's objects: the working tree is not touched."""
    root = _agent_root(agent_dir)
    try:
        sha = resolve_commit(root, commit)
        top = Path(git(root, "rev-parse", "--show-toplevel").decode().strip()).resolve()
    except GitError as exc:
        raise SnapshotError(str(exc)) from exc
    prefix = root.relative_to(top).as_posix()
    treeish = sha if prefix == "." else f"{sha}:{prefix}"
    try:
        listing = git(top, "ls-tree", "-r", "-z", "-l", treeish, timeout=_GIT_TIMEOUT)
    except GitError:
        raise SnapshotError(f"{prefix} does not exist at commit {sha[:12]}") from None
    entries = _parse_ls_tree(listing)
    links = {rel: e for rel, e in entries.items() if e.mode == "120000"}
    targets = _cat_blobs(top, links.values())
    chosen = _tree_files(entries, {rel: os.fsdecode(targets[e.oid]) for rel, e in links.items()})
    packer = Packer(limits)
    for rel, entry in chosen:
        packer.admit(rel, entry.size)
    blobs = _cat_blobs(top, [entry for _, entry in chosen])
    for rel, entry in chosen:
        packer.add(rel, blobs[entry.oid], 0o755 if entry.mode == "100755" else 0o644)
    return packer.finish(f"{agent_dir} at commit {sha[:12]}")


def snapshot_agent(
    agent_dir: Path, commit: str | None = None, *, limits: SnapshotLimits = DEFAULT_LIMITS
) -> PackedSnapshot:
    """What a launch runs: the tree of ``commit``, or the working tree when there is none."""
    if commit:
        return snapshot_commit(agent_dir, commit, limits=limits)
    return snapshot_working_tree(agent_dir, limits=limits)


def _left_out(rel: str) -> bool:
    return rel == RESULTS_DIR or rel.startswith(f"{RESULTS_DIR}/")


def _is_junk(rel: str, is_dir: bool) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name in JUNK_DIRS if is_dir else name.endswith(JUNK_SUFFIXES)


def _agent_root(agent_dir: Path) -> Path:
    root = agent_dir.resolve()
    if not root.is_dir():
        raise SnapshotError(f"{agent_dir} is not a directory")
    return root


# --- the working tree ---------------------------------------------------------------------------


def _names(output: bytes) -> list[str]:
    names = []
    for raw in output.split(b"\0"):
        if not raw:
            continue
        try:
            names.append(raw.decode())
        except UnicodeDecodeError:
            raise SnapshotError(
                f"{raw!r}: a file name that is not UTF-8 cannot be stored in a snapshot"
            ) from None
    return names


def _git_listing(root: Path) -> list[str] | None:
    """The files git would take under ``root``, relative to it (None: not in a work tree).
    Tracked files, whatever .gitignore says (a commit holds them too); untracked ones unless
    ignored, and without caches a missing .gitignore would let in."""
    try:
        if git(root, "rev-parse", "--is-inside-work-tree").strip() != b"true":
            return None
    except GitError:
        return None
    try:
        tracked = _names(git(root, "ls-files", "-z", "--cached", timeout=_GIT_TIMEOUT))
        untracked = _names(
            git(root, "ls-files", "-z", "--others", "--exclude-standard", timeout=_GIT_TIMEOUT)
        )
    except GitError as exc:
        raise SnapshotError(str(exc)) from exc
    junk = {
        rel
        for rel in untracked
        if _is_junk(rel, False) or any(_is_junk(d, True) for d in rel.split("/")[:-1])
    }
    listed = {rel for rel in [*tracked, *untracked] if rel not in junk and not _left_out(rel)}
    return sorted(listed)


def _add_listed(packer: Packer, root: Path, rel: str) -> None:
    path = root.joinpath(*rel.split("/"))
    if path.is_symlink():
        target = _inside(root, path, rel)
        if target.is_dir():
            _enter(packer, root, rel, target, _is_junk_rel, frozenset({root}), path.parent)
        else:
            packer.add_file(rel, target)
    elif path.is_file():
        packer.add_file(rel, path)
    # Otherwise deleted but still tracked, or a submodule's folder: nothing to take.


def _is_junk_rel(rel: str, is_dir: bool) -> bool:
    return _left_out(rel) or _is_junk(rel, is_dir)


def _ignore_rules(root: Path) -> Ignored:
    """Outside git: caches, ``results/`` and the patterns of the directory's own .gitignore."""
    gitignore = root / ".gitignore"
    lines = gitignore.read_text(errors="replace").splitlines() if gitignore.is_file() else []
    spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def ignored(rel: str, is_dir: bool) -> bool:
        return _is_junk_rel(rel, is_dir) or spec.match_file(f"{rel}/" if is_dir else rel)

    return ignored


def _walk(
    packer: Packer,
    root: Path,
    rel_dir: str,
    real_dir: Path,
    ignored: Ignored,
    chain: frozenset[Path],
) -> None:
    """Every file under ``real_dir``, stored under ``rel_dir`` (sorted, so the first file over a
    limit is the same from one machine to another)."""
    with os.scandir(real_dir) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        path = Path(entry.path)
        if entry.is_symlink():
            target = _inside(root, path, rel)
            if target.is_dir():
                if not ignored(rel, True):
                    _enter(packer, root, rel, target, ignored, chain, real_dir)
            elif not ignored(rel, False):
                packer.add_file(rel, target)
        elif entry.is_dir(follow_symlinks=False):
            if not ignored(rel, True):
                _walk(packer, root, rel, path, ignored, chain | {path})
        elif entry.is_file(follow_symlinks=False) and not ignored(rel, False):
            packer.add_file(rel, path)


def _enter(
    packer: Packer,
    root: Path,
    rel: str,
    target: Path,
    ignored: Ignored,
    chain: frozenset[Path],
    link_dir: Path,
) -> None:
    """Walk a directory reached through a symlink, unless that goes round in a loop."""
    if target in chain or link_dir.is_relative_to(target):
        raise SnapshotError(f"{rel} is a symlink that loops back to a folder that contains it")
    _walk(packer, root, rel, target, ignored, chain | {target})


def _inside(root: Path, link: Path, rel: str) -> Path:
    """Where the symlink ``link`` leads, if that stays inside the agent directory."""
    target = link.resolve()
    if not target.is_relative_to(root):
        raise SnapshotError(
            f"{rel} is a symlink to {os.readlink(link)}, outside the agent directory: a snapshot "
            "holds only the agent directory's files; copy the file in instead"
        )
    if not target.exists():
        raise SnapshotError(f"{rel} is a symlink to {os.readlink(link)}, which does not exist")
    return target


# --- a commit -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TreeEntry:
    mode: str  # git's: 100644, 100755, 120000 (symlink), 160000 (submodule)
    oid: str
    size: int


def _parse_ls_tree(listing: bytes) -> dict[str, _TreeEntry]:
    """``ls-tree -r -z -l`` records: ``<mode> <type> <oid> <size>\\t<path>``."""
    entries = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        head, _, raw_path = record.partition(b"\t")
        mode, _kind, oid, size = head.decode().split()
        (rel,) = _names(raw_path)
        entries[rel] = _TreeEntry(mode, oid, int(size) if size.isdigit() else 0)
    return entries


def _cat_blobs(top: Path, entries: Iterable[_TreeEntry]) -> dict[str, bytes]:
    """The contents of the blobs, by object id, in one ``git cat-file --batch``."""
    oids = sorted({e.oid for e in entries})
    if not oids:
        return {}
    try:
        batch = "".join(f"{o}\n" for o in oids).encode()
        output = git(top, "cat-file", "--batch", stdin=batch, timeout=_GIT_TIMEOUT)
    except GitError as exc:
        raise SnapshotError(str(exc)) from exc
    blobs: dict[str, bytes] = {}
    position = 0
    for oid in oids:
        end = output.index(b"\n", position)
        header = output[position:end].decode().split()
        if len(header) != 3 or header[0] != oid:
            raise SnapshotError(f"git cat-file could not read object {oid}: {header}")
        size = int(header[2])
        blobs[oid] = output[end + 1 : end + 1 + size]
        position = end + 1 + size + 1
    return blobs


def _tree_files(
    entries: Mapping[str, _TreeEntry], link_texts: Mapping[str, str]
) -> list[tuple[str, _TreeEntry]]:
    """(path in the snapshot, blob) for every file of the tree: symlinks replaced by what they
    lead to, submodules and ``results/`` left out."""
    chosen: list[tuple[str, _TreeEntry]] = []

    def visit(rel_out: str, rel_src: str, chain: frozenset[str]) -> None:
        entry = entries[rel_src]
        if entry.mode == "160000":
            return
        if entry.mode != "120000":
            chosen.append((rel_out, entry))
            return
        target = _resolve_tree_path(rel_src, entries, link_texts)
        if target in entries:
            visit(rel_out, target, chain)
            return
        if target == "" or rel_src.startswith(f"{target}/") or target in chain:
            raise SnapshotError(
                f"{rel_out} is a symlink that loops back to a folder that contains it"
            )
        for child in sorted(p for p in entries if p.startswith(f"{target}/")):
            visit(f"{rel_out}{child[len(target) :]}", child, chain | {target})

    for rel in sorted(entries):
        if not _left_out(rel):
            visit(rel, rel, frozenset())
    return chosen


def _resolve_tree_path(
    rel: str, entries: Mapping[str, _TreeEntry], link_texts: Mapping[str, str]
) -> str:
    """Where the symlink ``rel`` leads in the tree, following links on the way (a file, a folder,
    or "" for the agent directory itself). Refused if it leaves the agent directory."""
    parts = [*posixpath.dirname(rel).split("/"), rel.rsplit("/", 1)[-1]]
    parts = [p for p in parts if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        candidate = "/".join([*resolved, parts[0]])
        if candidate in link_texts:
            hops += 1
            if hops > _MAX_LINK_HOPS:
                raise SnapshotError(f"{rel} is a symlink that goes round in a loop")
            text = link_texts[candidate]
            joined = posixpath.normpath(posixpath.join("/".join(resolved), text, *parts[1:]))
            if text.startswith("/") or joined == ".." or joined.startswith("../"):
                raise SnapshotError(
                    f"{rel} is a symlink to {link_texts[rel]}, outside the agent directory: a "
                    "snapshot holds only the agent directory's files; copy the file in instead"
                )
            parts, resolved = [p for p in joined.split("/") if p not in ("", ".")], []
            continue
        resolved.append(parts.pop(0))
    target = "/".join(resolved)
    if target and target not in entries and not any(p.startswith(f"{target}/") for p in entries):
        raise SnapshotError(f"{rel} is a symlink to {link_texts[rel]}, which does not exist")
    return target

"""Sealed snapshots of an agent directory: the files a run runs, packed into a content-addressed
archive at launch, and unpacked once per machine into a cache keyed by their hash.

Django-free: the services store the archive and its digest; a worker that lacks the directory
calls ``unpack`` and runs from the returned folder.

- In a git repository the working-tree snapshot takes the files git would (tracked files, and
  untracked ones not ignored by ``.gitignore``, without caches); outside git every file except
  caches and what the agent directory's own ``.gitignore`` names (only that one: nested ones are
  git's business). The commit snapshot takes the tree of that commit.
- The top-level ``results/`` folder is always left out: runs write there.
- A symlink that stays inside the agent directory is followed (its target's content is stored
  under the link's path); one that leaves it is refused, since the snapshot must hold all the
  agent reads.
- The digest is a sha256 over the sorted (path, mode, file sha256) manifest, so the same files
  give the same digest whatever their timestamps or the order the disk lists them in.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import posixpath
import shutil
import stat
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from runs.gitutil import GitError, resolve_commit

FORMAT = "holodeck-snapshot/1"
RESULTS_DIR = "results"
MARKER_SUFFIX = ".complete"
# Left out of untracked files (and of everything outside git): caches and local state that
# change when the agent runs, and would change the digest of an unchanged agent.
JUNK_DIRS = frozenset({".git", "__pycache__", ".holodeck", ".venv", "venv", "node_modules"})
JUNK_SUFFIXES = (".pyc",)
HOW_TO_LEAVE_OUT = (
    "Leave out what the agent does not need: list it in the project's .gitignore "
    "(the results/ folder is always left out)."
)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# Launch latency over archive size: on 5 MB of text level 1 packs in ~0.14 s, level 6 in ~0.57 s
# for an archive ~30 % smaller; and an archive is made once per distinct tree.
_ZIP_LEVEL = 1
_UNIX = 3  # ZipInfo.create_system: the external attributes hold a Unix mode
_MAX_LINK_HOPS = 40
_GIT_TIMEOUT = 120

Ignored = Callable[[str, bool], bool]


class SnapshotError(Exception):
    """A directory that cannot be snapshotted (over a limit, a symlink leaving it), or an archive
    that is not a sound snapshot (tampered, path-traversing)."""


@dataclass(frozen=True)
class SnapshotLimits:
    max_files: int = 2_000
    max_file_bytes: int = 20 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024


DEFAULT_LIMITS = SnapshotLimits()


@dataclass(frozen=True)
class SnapshotFile:
    path: str  # posix, relative to the agent directory
    size: int
    sha256: str
    mode: int  # 0o644 or 0o755


@dataclass(frozen=True)
class Snapshot:
    digest: str
    files: tuple[SnapshotFile, ...]  # sorted by path

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def file(self, path: str) -> SnapshotFile | None:
        return next((f for f in self.files if f.path == path), None)

    def manifest(self) -> list[dict[str, str | int]]:
        """The files as JSON-ready rows (to store beside the archive)."""
        return [
            {"path": f.path, "size": f.size, "sha256": f.sha256, "mode": f.mode} for f in self.files
        ]


@dataclass(frozen=True)
class SnapshotDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]  # content or executable bit
    identical: tuple[str, ...]


@dataclass(frozen=True)
class PackedSnapshot:
    snapshot: Snapshot
    contents: Mapping[str, bytes] = field(repr=False)

    @property
    def digest(self) -> str:
        return self.snapshot.digest

    def read(self, path: str) -> bytes:
        return self.contents[path]

    def to_zip(self) -> bytes:
        """A deterministic archive: sorted entries, fixed timestamps, each entry's comment its
        sha256 and the archive's comment the digest (what ``from_zip`` checks)."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.comment = f"{FORMAT} {self.digest}".encode()
            for entry in self.snapshot.files:
                info = zipfile.ZipInfo(entry.path, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = _UNIX
                info.external_attr = (stat.S_IFREG | entry.mode) << 16
                info.comment = entry.sha256.encode()
                archive.writestr(info, self.contents[entry.path], compresslevel=_ZIP_LEVEL)
        return buffer.getvalue()

    @classmethod
    def from_zip(
        cls,
        data: bytes,
        *,
        expected_digest: str | None = None,
        limits: SnapshotLimits = DEFAULT_LIMITS,
    ) -> PackedSnapshot:
        """The snapshot in ``data``, every file's hash and the digest checked; a path that is
        absolute, climbs with ``..`` or repeats is refused, and so is an archive over the
        limits (checked on the declared sizes before anything is inflated)."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                packed = _read_archive(archive, limits)
                claimed = archive.comment.decode("utf-8", "replace")
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError) as exc:
            raise SnapshotError(f"not a sound snapshot archive: {exc}") from exc
        if claimed != f"{FORMAT} {packed.digest}":
            raise SnapshotError(
                f"the archive's digest ({claimed!r}) does not match its files ({packed.digest})"
            )
        if expected_digest is not None and expected_digest != packed.digest:
            raise SnapshotError(
                f"the archive holds snapshot {packed.digest}, not the expected {expected_digest}"
            )
        return packed

    def extract(self, directory: Path) -> None:
        """Write the files under ``directory`` (which must exist) with their modes."""
        for entry in self.snapshot.files:
            target = directory.joinpath(*entry.path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.contents[entry.path])
            target.chmod(entry.mode)


# --- snapshots of a directory -------------------------------------------------------------------


def snapshot_working_tree(
    agent_dir: Path, *, limits: SnapshotLimits = DEFAULT_LIMITS
) -> PackedSnapshot:
    """The agent directory as it is now (what a launch without a commit runs)."""
    root = _agent_root(agent_dir)
    packer = _Packer(limits)
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
        top = Path(_git(root, "rev-parse", "--show-toplevel").decode().strip()).resolve()
    except GitError as exc:
        raise SnapshotError(str(exc)) from exc
    prefix = root.relative_to(top).as_posix()
    treeish = sha if prefix == "." else f"{sha}:{prefix}"
    try:
        listing = _git(top, "ls-tree", "-r", "-z", "-l", treeish)
    except GitError:
        raise SnapshotError(f"{prefix} does not exist at commit {sha[:12]}") from None
    entries = _parse_ls_tree(listing)
    links = {rel: e for rel, e in entries.items() if e.mode == "120000"}
    targets = _cat_blobs(top, links.values())
    chosen = _tree_files(entries, {rel: os.fsdecode(targets[e.oid]) for rel, e in links.items()})
    packer = _Packer(limits)
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


def snapshot_digest(files: Iterable[SnapshotFile]) -> str:
    """sha256 over the canonical JSON of the sorted (path, mode, sha256) rows."""
    rows = sorted((f.path, f.mode, f.sha256) for f in files)
    canonical = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{FORMAT}\n{canonical}".encode()).hexdigest()


def snapshot_diff(old: Snapshot, new: Snapshot) -> SnapshotDiff:
    """Which paths the two snapshots add, remove, change or share (each sorted)."""
    before = {f.path: (f.sha256, f.mode) for f in old.files}
    after = {f.path: (f.sha256, f.mode) for f in new.files}
    both = sorted(before.keys() & after.keys())
    return SnapshotDiff(
        added=tuple(sorted(after.keys() - before.keys())),
        removed=tuple(sorted(before.keys() - after.keys())),
        changed=tuple(p for p in both if before[p] != after[p]),
        identical=tuple(p for p in both if before[p] == after[p]),
    )


# --- the local cache ----------------------------------------------------------------------------


def unpack(snapshot_zip: bytes, digest: str, cache_dir: Path) -> Path:
    """``cache_dir/<digest>``, holding the snapshot's files: extracted (and checked) once, by the
    first caller; later calls, in any process, find the marker and return at once."""
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise SnapshotError(f"{digest!r} is not a snapshot digest")
    final = cache_dir / digest
    marker = cache_dir / f"{digest}{MARKER_SUFFIX}"
    if marker.is_file() and final.is_dir():
        return final
    packed = PackedSnapshot.from_zip(snapshot_zip, expected_digest=digest)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # A folder without the marker was renamed into place complete by a process that died
    # before marking it (or is marking it now): checked, not extracted again.
    if not (final.is_dir() and _holds(final, packed.snapshot)):
        _install(packed, final)
    _write_marker(marker, digest)
    return final


def _install(packed: PackedSnapshot, final: Path) -> None:
    """Extract into a private folder beside ``final``, then rename it into place: a reader sees
    the whole snapshot or none of it. If another process got there first, use theirs."""
    partial = Path(
        tempfile.mkdtemp(prefix=f".partial-{packed.digest[:16]}-{os.getpid()}-", dir=final.parent)
    )
    try:
        partial.chmod(0o755)
        packed.extract(partial)
        try:
            partial.rename(final)
            return
        except OSError:
            if final.is_dir() and _holds(final, packed.snapshot):
                return
        # Not ours and not sound (edited by hand, half deleted): set it aside, then take its place.
        stale = Path(tempfile.mkdtemp(prefix=f".stale-{packed.digest[:16]}-", dir=final.parent))
        with contextlib.suppress(FileNotFoundError):
            final.rename(stale / "tree")
        partial.rename(final)
        shutil.rmtree(stale, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _holds(directory: Path, snapshot: Snapshot) -> bool:
    """Every file of the snapshot is in ``directory`` with its content and mode (extra files,
    such as ``__pycache__`` written by a run, do not matter)."""
    for entry in snapshot.files:
        path = directory.joinpath(*entry.path.split("/"))
        try:
            data = path.read_bytes()
            executable = bool(path.stat().st_mode & stat.S_IXUSR)
        except OSError:
            return False
        if hashlib.sha256(data).hexdigest() != entry.sha256 or executable != (entry.mode == 0o755):
            return False
    return True


def _write_marker(marker: Path, digest: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".marker-{digest[:16]}-", dir=marker.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{FORMAT} {digest}\n")
    os.replace(tmp, marker)


# --- collecting files within the limits ---------------------------------------------------------


class _Packer:
    def __init__(self, limits: SnapshotLimits) -> None:
        self.limits = limits
        self.files: dict[str, SnapshotFile] = {}
        self.contents: dict[str, bytes] = {}
        self.admitted: dict[str, int] = {}  # path -> size counted
        self.total = 0

    def admit(self, rel: str, size: int) -> None:
        """Check the limits before the content is read."""
        limits = self.limits
        if len(self.admitted) >= limits.max_files:
            raise SnapshotError(
                f"{rel}: the agent directory has more than {limits.max_files:,} files, the "
                f"snapshot limit. {HOW_TO_LEAVE_OUT}"
            )
        if size > limits.max_file_bytes:
            raise SnapshotError(
                f"{rel} is {_size(size)}, over the snapshot limit of "
                f"{_size(limits.max_file_bytes)} per file. {HOW_TO_LEAVE_OUT}"
            )
        if self.total + size > limits.max_total_bytes:
            raise SnapshotError(
                f"{rel}: with this file the snapshot reaches {_size(self.total + size)}, over "
                f"the limit of {_size(limits.max_total_bytes)} in total. {HOW_TO_LEAVE_OUT}"
            )
        self.admitted[rel] = size
        self.total += size

    def add(self, rel: str, data: bytes, mode: int) -> None:
        _check_path(rel)
        if rel in self.files:
            return
        if self.admitted.get(rel) != len(data):  # not admitted yet, or changed since
            self.total -= self.admitted.pop(rel, 0)
            self.admit(rel, len(data))
        self.files[rel] = SnapshotFile(rel, len(data), hashlib.sha256(data).hexdigest(), mode)
        self.contents[rel] = data

    def add_file(self, rel: str, path: Path) -> None:
        info = path.stat()
        self.admit(rel, info.st_size)
        self.add(rel, path.read_bytes(), 0o755 if info.st_mode & stat.S_IXUSR else 0o644)

    def finish(self, source: str) -> PackedSnapshot:
        if not self.files:
            raise SnapshotError(
                f"{source} has no files to snapshot (are they all ignored by .gitignore?)"
            )
        files = tuple(self.files[rel] for rel in sorted(self.files))
        return PackedSnapshot(Snapshot(snapshot_digest(files), files), dict(self.contents))


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f}".removesuffix(".0") + " MB"
    if n >= 1024:
        return f"{n / 1024:.1f}".removesuffix(".0") + " KB"
    return f"{n} bytes"


def _check_path(rel: str) -> None:
    """A relative posix path that stays where it is put: no ``..``, no absolute path."""
    parts = rel.split("/")
    if (
        not rel
        or rel.startswith("/")
        or "\\" in rel
        or "\0" in rel
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise SnapshotError(f"{rel!r} is not a safe relative path for a snapshot file")


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


def _git(directory: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """git's raw output (file names may hold any byte but NUL: no text decoding, no strip)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            input=stdin,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {' '.join(args)} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise GitError(message or f"git {' '.join(args)} failed")
    return done.stdout


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
        if _git(root, "rev-parse", "--is-inside-work-tree").strip() != b"true":
            return None
    except GitError:
        return None
    try:
        tracked = _names(_git(root, "ls-files", "-z", "--cached"))
        untracked = _names(_git(root, "ls-files", "-z", "--others", "--exclude-standard"))
    except GitError as exc:
        raise SnapshotError(str(exc)) from exc
    junk = {
        rel
        for rel in untracked
        if _is_junk(rel, False) or any(_is_junk(d, True) for d in rel.split("/")[:-1])
    }
    listed = {rel for rel in [*tracked, *untracked] if rel not in junk and not _left_out(rel)}
    return sorted(listed)


def _add_listed(packer: _Packer, root: Path, rel: str) -> None:
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
    packer: _Packer,
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
    packer: _Packer,
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
        output = _git(top, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in oids).encode())
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


# --- reading an archive -------------------------------------------------------------------------


def _read_archive(archive: zipfile.ZipFile, limits: SnapshotLimits) -> PackedSnapshot:
    infos = archive.infolist()
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise SnapshotError(f"the archive holds {duplicate} twice")
    _check_no_file_folder_clash(names)
    packer = _Packer(limits)
    for info in infos:
        _check_path(info.filename)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if info.is_dir() or kind not in (0, stat.S_IFREG):
            raise SnapshotError(f"{info.filename}: only regular files belong in a snapshot")
        packer.admit(info.filename, info.file_size)
    for info in infos:
        data = archive.read(info)
        claimed = info.comment.decode("ascii", "replace")
        if hashlib.sha256(data).hexdigest() != claimed:
            raise SnapshotError(f"{info.filename}: its content does not match its sha256")
        mode = 0o755 if (info.external_attr >> 16) & stat.S_IXUSR else 0o644
        packer.add(info.filename, data, mode)
    return packer.finish("the archive")


def _check_no_file_folder_clash(names: list[str]) -> None:
    """``a`` as a file and ``a/b`` beside it cannot both be extracted."""
    present = set(names)
    for name in names:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in present:
                raise SnapshotError(f"the archive holds {folder} both as a file and a folder")

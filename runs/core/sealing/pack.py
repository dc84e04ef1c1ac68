"""A snapshot's files and their deterministic zip: ``Snapshot`` (the manifest and its digest),
``PackedSnapshot`` (the files' contents too, to and from the archive a run's launch stores),
and the ``Packer`` that collects files within ``SnapshotLimits``.

- The digest is a sha256 over the sorted (path, mode, file sha256) manifest, so the same files
  give the same digest whatever their timestamps or the order the disk lists them in.
- The archive is deterministic (sorted entries, fixed timestamps), each entry's comment its
  sha256 and the archive's comment the digest; reading it back checks all of them, through the
  project's guarded zip reader (``runs.core.zipguard``: nothing inflated before the whole archive is
  vetted against the limits).
"""

from __future__ import annotations

import hashlib
import io
import json
import stat
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runs.core.bytesize import size_text
from runs.core.zipguard import UNREADABLE, ZipLimits, zip_members, zip_open, zip_read

FORMAT = "holodeck-snapshot/1"
HOW_TO_LEAVE_OUT = (
    "Leave out what the agent does not need: list it in the project's .gitignore "
    "(the results/ folder is always left out)."
)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# Launch latency over archive size: on 5 MB of text level 1 packs in ~0.14 s, level 6 in ~0.57 s
# for an archive ~30 % smaller; and an archive is made once per distinct tree.
_ZIP_LEVEL = 1
_UNIX = 3  # ZipInfo.create_system: the external attributes hold a Unix mode


class SnapshotError(Exception):
    """A directory that cannot be snapshotted (over a limit, a symlink leaving it), or an archive
    that is not a sound snapshot (tampered, path-traversing)."""


@dataclass(frozen=True)
class SnapshotLimits:
    max_files: int = 2_000
    max_file_bytes: int = 20 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024

    def for_zip(self) -> ZipLimits:
        """The same limits, for vetting an archive before it is inflated."""
        return ZipLimits(
            max_members=self.max_files,
            max_unpacked_bytes=self.max_total_bytes,
            max_member_bytes=self.max_file_bytes,
        )


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
            with zip_open(data) as archive:
                packed = _read_archive(archive, limits)
                claimed = archive.comment.decode("utf-8", "replace")
        except UNREADABLE as exc:  # the guard's refusals (ZipRefused) too
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


def snapshot_digest(files: Iterable[SnapshotFile]) -> str:
    """sha256 over the canonical JSON of the sorted (path, mode, sha256) rows."""
    rows = sorted((f.path, f.mode, f.sha256) for f in files)
    canonical = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{FORMAT}\n{canonical}".encode()).hexdigest()


# --- collecting files within the limits ---------------------------------------------------------


class Packer:
    """The files of a snapshot as they are collected, refused past the limits with a message
    naming the file that crosses one."""

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
                f"{rel} is {size_text(size)}, over the snapshot limit of "
                f"{size_text(limits.max_file_bytes)} per file. {HOW_TO_LEAVE_OUT}"
            )
        if self.total + size > limits.max_total_bytes:
            raise SnapshotError(
                f"{rel}: with this file the snapshot reaches {size_text(self.total + size)}, "
                f"over the limit of {size_text(limits.max_total_bytes)} in total. "
                f"{HOW_TO_LEAVE_OUT}"
            )
        self.admitted[rel] = size
        self.total += size

    def add(self, rel: str, data: bytes, mode: int) -> None:
        check_path(rel)
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


def check_path(rel: str) -> None:
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


# --- reading an archive -------------------------------------------------------------------------


def _read_archive(archive: zipfile.ZipFile, limits: SnapshotLimits) -> PackedSnapshot:
    infos = zip_members(archive, limits.for_zip())
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise SnapshotError(f"the archive holds {duplicate} twice")
    _check_no_file_folder_clash(names)
    for info in infos:
        check_path(info.filename)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if info.is_dir() or kind not in (0, stat.S_IFREG):
            raise SnapshotError(f"{info.filename}: only regular files belong in a snapshot")
    packer = Packer(limits)
    for info in infos:
        data = zip_read(archive, info)
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

"""The local cache of unpacked snapshots: a worker that lacks an agent's directory unpacks the
run's snapshot once per machine into ``<cache>/<digest>`` and runs from there.

Extracted into a private folder and renamed into place, then marked complete: a reader sees the
whole snapshot or none of it, whichever process got there first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from runs.core.sealing.pack import FORMAT, PackedSnapshot, Snapshot, SnapshotError

MARKER_SUFFIX = ".complete"


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

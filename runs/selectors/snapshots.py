"""Reads of the snapshots runs ran: a run's manifest, its archive, a few of its files.

An archive can be tens of MB, so the queries that list files defer it: the manifest (a JSON
column beside it) says which files there are and their hashes; the archive is read only to
serve it, or to show the files a page needs (one query for every archive it needs).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.http import Http404
from django.shortcuts import get_object_or_404

from runs.core.attributes import of_attributes
from runs.core.sealing import Snapshot, SnapshotError, SnapshotFile
from runs.models import AgentSnapshot, Run

# Run columns the snapshot pages never read.
HEAVY_RUN_FIELDS = ("raw_yaml", "config_snapshot", "environment", "cli_args", "summary")
NO_SNAPSHOT = (
    "run #{run_id} has no snapshot of its files: imported runs, and runs stored before "
    "snapshots were kept, record only their agent.yaml"
)


@dataclass(frozen=True)
class StoredSnapshot:
    """A stored snapshot's facts and manifest, without its archive."""

    id: int
    digest: str
    file_count: int
    total_bytes: int
    created_at: datetime
    files: tuple[SnapshotFile, ...]  # sorted by path

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    def file(self, path: str) -> SnapshotFile | None:
        return next((f for f in self.files if f.path == path), None)

    def as_snapshot(self) -> Snapshot:
        return Snapshot(self.digest, self.files)


def stored_snapshot(row: AgentSnapshot) -> StoredSnapshot:
    """The facts of a snapshot row (read with its archive deferred)."""
    files = tuple(
        SnapshotFile(
            path=str(entry["path"]),
            size=int(entry["size"]),
            sha256=str(entry["sha256"]),
            mode=int(entry["mode"]),
        )
        for entry in sorted(row.manifest, key=lambda entry: str(entry["path"]))
    )
    return of_attributes(StoredSnapshot, row, files=files)


def run_snapshot_get(*, run_id: int) -> tuple[Run, StoredSnapshot | None]:
    """A run with its snapshot's manifest (None: the run has none), or 404 (1 query)."""
    run = get_object_or_404(
        Run.objects.select_related("project", "snapshot")
        .defer(*HEAVY_RUN_FIELDS)
        .defer("snapshot__archive"),
        pk=run_id,
    )
    return run, (stored_snapshot(run.snapshot) if run.snapshot is not None else None)


def run_snapshot_required(*, run_id: int) -> tuple[Run, StoredSnapshot]:
    """A run and its snapshot, or 404 (no such run, or a run without a snapshot) (1 query)."""
    run, snapshot = run_snapshot_get(run_id=run_id)
    if snapshot is None:
        raise Http404(NO_SNAPSHOT.format(run_id=run.pk))
    return run, snapshot


def snapshot_archive(*, snapshot_id: int) -> bytes:
    """The snapshot's zip, as stored (1 query)."""
    archive = AgentSnapshot.objects.filter(pk=snapshot_id).values_list("archive", flat=True).get()
    return bytes(archive)


def snapshot_contents(
    *, wanted: Mapping[int, Iterable[SnapshotFile]]
) -> dict[tuple[int, str], bytes]:
    """The contents of some files of some snapshots, by (snapshot id, path): one query reads
    the archives that hold them, and only those files are inflated, each checked against the
    sha256 of its manifest entry."""
    needed = {snapshot_id: list(files) for snapshot_id, files in wanted.items() if files}
    if not needed:
        return {}
    archives = AgentSnapshot.objects.filter(pk__in=needed).values_list("pk", "archive")
    contents: dict[tuple[int, str], bytes] = {}
    for snapshot_id, archive in archives:
        contents.update(
            {
                (snapshot_id, path): data
                for path, data in archive_read(bytes(archive), needed[snapshot_id]).items()
            }
        )
    return contents


def archive_read(archive: bytes, files: Iterable[SnapshotFile]) -> dict[str, bytes]:
    """The named files of a snapshot's zip (only those are inflated), each checked against the
    sha256 its manifest gives."""
    found: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as opened:
            for entry in files:
                data = opened.read(entry.path)
                if hashlib.sha256(data).hexdigest() != entry.sha256:
                    raise SnapshotError(f"{entry.path}: the stored archive does not match its hash")
                found[entry.path] = data
    except (zipfile.BadZipFile, zlib.error, KeyError, EOFError) as exc:
        raise SnapshotError(f"the stored snapshot archive is not sound: {exc}") from exc
    return found

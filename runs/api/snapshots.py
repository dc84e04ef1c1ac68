"""What a run ran: its snapshot's manifest, and the snapshot itself as a zip."""

from datetime import datetime
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Router, Schema
from ninja.errors import HttpError

from runs.api.auth import staff_only
from runs.api.schemas import Id, responses
from runs.selectors.snapshots import NO_SNAPSHOT, StoredSnapshot, run_snapshot_get
from runs.shared.downloads import snapshot_facts, snapshot_zip_response

if TYPE_CHECKING:
    from runs.models import Run

router = Router(tags=["runs"])


class SnapshotFileOut(Schema):
    """One file: its path in the agent directory, size in bytes, sha256, and mode (``644``,
    or ``755`` for an executable)."""

    path: str
    size: int
    sha256: str
    mode: str


class SnapshotOut(Schema):
    """The files a run ran, sealed at its launch (content-addressed: ``digest`` is a sha256 over
    the sorted paths, modes and file hashes; runs of the same tree share it)."""

    run_id: int
    digest: str
    file_count: int
    total_bytes: int
    created_at: datetime
    files: list[SnapshotFileOut]
    zip_url: str  # this API's path of the zip


@router.get(
    "/runs/{run_id}/snapshot",
    response=responses({200: SnapshotOut}, 404),
    summary="The files the run ran (its snapshot's manifest); 404 for a run without one",
)
def run_snapshot(request: HttpRequest, run_id: Id) -> object:
    run, snapshot = _run_snapshot(run_id)
    zip_url = reverse("api:run_snapshot_zip", kwargs={"run_id": run.pk})
    return {"run_id": run.pk, **snapshot_facts(snapshot), "zip_url": zip_url}


@router.get(
    "/runs/{run_id}/snapshot.zip",
    response=responses({200: None}, 403, 404),
    url_name="run_snapshot_zip",
    summary="The run's snapshot: a zip of the files it ran, as stored (staff only)",
)
def run_snapshot_zip(request: HttpRequest, run_id: Id) -> HttpResponse:
    # Its files may hold secrets (a .env outside git is packed too); the manifest may not.
    staff_only(request, "download a run's snapshot")
    run, snapshot = _run_snapshot(run_id)
    return snapshot_zip_response(run=run, snapshot=snapshot)


def _run_snapshot(run_id: int) -> "tuple[Run, StoredSnapshot]":
    """The run and its snapshot; 404 saying why for a run without one."""
    run, snapshot = run_snapshot_get(run_id=run_id)
    if snapshot is None:
        raise HttpError(404, NO_SNAPSHOT.format(run_id=run.pk))
    return run, snapshot

"""Downloads, the same response for a page's link and the API: a run (``GET
/api/v1/runs/{id}/export``, the text ``run_agent --output`` writes) and its snapshot (``GET
/api/v1/runs/{id}/snapshot.zip``), with the snapshot's facts as the API answers them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpResponse
from django.utils.http import content_disposition_header

from runs import selectors
from runs.core.wire.holodeck_io import slugify
from runs.core.writers.results import export_text
from runs.selectors.snapshots import StoredSnapshot, snapshot_archive

if TYPE_CHECKING:
    from runs.core.writers.results import ExportFormat
    from runs.models import Run

# format -> (content type, file name suffix)
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "json": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
    "junit": ("application/xml", "xml"),
}


def run_export_response(*, run_id: int, fmt: ExportFormat) -> HttpResponse:
    """The run as an attachment: ``json`` a HoloDeck-compatible result file (an EvalRun),
    ``markdown`` or ``junit`` (XML). 404 when there is no such run."""
    content_type, suffix = EXPORT_FORMATS[fmt]
    run = selectors.run_get(run_id=run_id)
    text = export_text(selectors.run_eval_run(run=run), fmt)
    response = HttpResponse(text, content_type=content_type)
    filename = f"{slugify(run.agent_name)}-run-{run.pk}.{suffix}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def snapshot_zip_response(*, run: Run, snapshot: StoredSnapshot) -> HttpResponse:
    """The snapshot as stored (a zip of its files), as an attachment named after the agent and
    the snapshot's digest (1 query). The dashboard's link and ``GET
    /api/v1/runs/{id}/snapshot.zip`` serve it."""
    name = f"{slugify(run.agent_name)}-snapshot-{snapshot.short_digest}.zip"
    return attachment(snapshot_archive(snapshot_id=snapshot.id), name, "application/zip")


def snapshot_facts(snapshot: StoredSnapshot) -> dict[str, object]:
    """The snapshot's facts and manifest, as the API answers them."""
    facts = {name: value for name, value in vars(snapshot).items() if name not in {"id", "files"}}
    files = [{**vars(file), "mode": f"{file.mode:o}"} for file in snapshot.files]
    return {**facts, "files": files}


def attachment(data: bytes, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Content-Length"] = str(len(data))
    return response

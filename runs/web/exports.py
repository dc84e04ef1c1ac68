"""A run for download, the same response for the run page's link and ``GET
/api/v1/runs/{id}/export``: the text ``run_agent --output`` writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpResponse

from runs import selectors

if TYPE_CHECKING:
    from runs.core.writers.results import ExportFormat

# format -> (content type, file name suffix)
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "json": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
    "junit": ("application/xml", "xml"),
}


def run_export_response(*, run_id: int, fmt: ExportFormat) -> HttpResponse:
    """The run as an attachment: ``json`` a HoloDeck-compatible result file (an EvalRun),
    ``markdown`` or ``junit`` (XML). 404 when there is no such run."""
    from runs.core.wire.holodeck_io import slugify
    from runs.core.writers.results import export_text

    content_type, suffix = EXPORT_FORMATS[fmt]
    run = selectors.run_get(run_id=run_id)
    text = export_text(selectors.run_eval_run(run=run), fmt)
    response = HttpResponse(text, content_type=content_type)
    filename = f"{slugify(run.agent_name)}-run-{run.pk}.{suffix}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response

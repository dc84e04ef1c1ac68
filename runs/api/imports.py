"""Import HoloDeck result files (upload) into a project."""

from typing import TYPE_CHECKING

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError

from runs import selectors
from runs.api.auth import staff_only
from runs.api.schemas import MAX_ID, ErrorOut
from runs.core.queryvalues import QueryValueError, parse_int
from runs.services.history import uploads_import
from runs.shared.uploads import UploadsRejected, max_unpacked_bytes, read_uploads

if TYPE_CHECKING:
    from runs.models import AgentProject

router = Router(tags=["import"])


class FileImportOut(Schema):
    """One uploaded file, or one ``*.json`` inside an uploaded zip (``archive.zip/path``)."""

    name: str
    imported: list[int]
    already_imported: list[int]
    errors: list[str]


class ImportOut(Schema):
    files: list[FileImportOut]
    imported: int
    already_imported: int


# The body is read by hand (after the size check), so the schema is spelled out for the docs.
MULTIPART_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "EvalRun JSON files, JSON lists of EvalRuns, bare "
                            "TestReports, or .zip archives of a results/ directory",
                        },
                        "project": {"type": "integer", "description": "a project id"},
                    },
                }
            }
        },
    }
}


@router.post(
    "/imports",
    response={
        200: ImportOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        413: ErrorOut,
        422: ErrorOut,
    },
    summary="Import HoloDeck result files",
    description=(
        "Multipart upload: the field `files` (repeated) and an optional `project` id. Each "
        "file is reported on its own: the runs it created, the runs already holding its "
        "results (importing is idempotent), and its problems. A request larger than "
        "HOLODECK_IMPORT_MAX_BYTES is a 413."
    ),
    openapi_extra=MULTIPART_BODY,
)
def imports_create(request: HttpRequest) -> object:
    staff_only(request, "import results")

    try:
        uploads = read_uploads(request)
    except UploadsRejected as exc:
        return exc.status, {"detail": exc.message}
    project = _project(request.POST.get("project", ""))
    if not uploads:
        raise HttpError(422, "no file: send one or more result files in the field `files`")
    results = uploads_import(
        uploads,
        project=project,
        max_unpacked_bytes=max_unpacked_bytes(),
        user=request.auth,  # type: ignore[attr-defined]
    )
    files = [
        {
            "name": result.name,
            "imported": [run.pk for run in result.imported],
            "already_imported": [run.pk for run in result.already_imported],
            "errors": result.errors,
        }
        for result in results
    ]
    return {
        "files": files,
        "imported": sum(len(result.imported) for result in results),
        "already_imported": sum(len(result.already_imported) for result in results),
    }


def _project(value: str) -> "AgentProject | None":
    """The project the form's ``project`` names (an id in ASCII digits), None when empty."""
    if not value.strip():
        return None
    try:
        project_id = parse_int(value, minimum=1, maximum=MAX_ID)  # "٣" is no id, nor "²"
    except QueryValueError:
        raise HttpError(422, f"project={value[:40]!r} is not a project id") from None
    project = selectors.project_find(project_id=project_id)
    if project is None:
        raise HttpError(422, f"no project with id {project_id}")
    return project

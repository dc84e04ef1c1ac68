"""Import HoloDeck result files from the browser (staff only).

The page renders its report directly (no redirect): one row per file, with the runs it created,
the runs that already held its results, and its problems. The upload's size is checked before
its body is read, so an oversized upload gets the page with a message, not a bare 413.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, SuspiciousOperation, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods

from runs.models import AgentProject
from runs.services.history import ZIP_MAX_EXPANSION, SourceImport, Upload, uploads_import


class ImportForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=AgentProject.objects.order_by("name"),
        required=False,
        empty_label="no project",
        help_text="the project the imported runs belong to",
    )


class UploadsRejected(Exception):
    """The request's files cannot be read: too large, too many, or a broken multipart body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def read_uploads(request: HttpRequest, field: str = "files") -> list[Upload]:
    """The request's uploaded files. A request larger than ``HOLODECK_IMPORT_MAX_BYTES`` is
    refused from its Content-Length, before its body is read (413)."""
    limit = settings.HOLODECK_IMPORT_MAX_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise UploadsRejected(413, too_large_message(length, limit))
    try:
        files = request.FILES.getlist(field)
    except TooManyFilesSent:
        raise UploadsRejected(
            413,
            f"Too many files in one upload (at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES}): "
            "upload a .zip of the results/ directory instead.",
        ) from None
    except (SuspiciousOperation, MultiPartParserError, UnreadablePostError) as exc:
        raise UploadsRejected(400, f"The upload could not be read: {exc}") from None
    total = sum(file.size or 0 for file in files)
    if total > limit:  # a body without a usable Content-Length
        raise UploadsRejected(413, too_large_message(total, limit))
    return [Upload(name=file.name or "upload", content=file.read()) for file in files]


def too_large_message(size: int, limit: int) -> str:
    return (
        f"The upload is too large: {size / 1_000_000:,.1f} MB, at most "
        f"{limit / 1_000_000:,.1f} MB per upload. Upload fewer files at a time, or a .zip "
        "of the results/ directory."
    )


def max_unpacked_bytes() -> int:
    return int(settings.HOLODECK_IMPORT_MAX_BYTES) * ZIP_MAX_EXPANSION


@csrf_exempt  # checked by _import_post once the body is known to be within the size limit
@login_required
@require_http_methods(["GET", "POST"])
def import_results(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can import results.")
    if request.method == "GET":
        return _page(request, ImportForm())
    try:
        uploads = read_uploads(request)
    except UploadsRejected as exc:
        return _page(request, ImportForm(), problem=exc.message, status=exc.status)
    return _import_post(request, uploads)


@csrf_protect
def _import_post(request: HttpRequest, uploads: list[Upload]) -> HttpResponse:
    form = ImportForm(request.POST)
    if not form.is_valid():
        return _page(request, form)
    if not uploads:
        return _page(request, form, problem="Choose at least one result file (.json or .zip).")
    results = uploads_import(
        uploads, project=form.cleaned_data["project"], max_unpacked_bytes=max_unpacked_bytes()
    )
    return _page(request, form, results=results)


def _page(
    request: HttpRequest,
    form: ImportForm,
    *,
    problem: str = "",
    results: list[SourceImport] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "form": form,
        "problem": problem,
        "results": results,
        "max_megabytes": f"{settings.HOLODECK_IMPORT_MAX_BYTES / 1_000_000:,.0f}",
    }
    if results is not None:
        context["totals"] = {
            "imported": sum(len(r.imported) for r in results),
            "already_imported": sum(len(r.already_imported) for r in results),
            "failed_files": sum(1 for r in results if r.errors),
        }
    return render(request, "runs/import.html", context, status=status)

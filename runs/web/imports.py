"""Import HoloDeck result files from the browser (staff only).

The page renders its report directly (no redirect): one row per file, with the runs it created,
the runs that already held its results, and its problems. The upload's size is checked before
its body is read, so an oversized upload gets the page with a message, not a bare 413.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods

from runs import selectors
from runs.services.history import SourceImport, Upload, uploads_import
from runs.shared.uploads import UploadsRejected, max_unpacked_bytes, read_uploads
from runs.web.params import AsciiModelChoiceField


class ImportForm(forms.Form):
    project = AsciiModelChoiceField(
        queryset=selectors.project_choices(),
        required=False,
        empty_label="no project",
        help_text="the project the imported runs belong to",
    )


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
        uploads,
        project=form.cleaned_data["project"],
        max_unpacked_bytes=max_unpacked_bytes(),
        user=request.user,
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

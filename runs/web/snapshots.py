"""What a run ran: its snapshot's file tree, one file as text, the whole snapshot as a zip.

Only the paths of the run's manifest are served: any other path is a 404 before the archive is
read, so no path given in a URL ever reaches the file system or the zip's other entries. A file
is shown as escaped text (or, binary, its size and a download), never as HTML of its own.

A snapshot may hold secrets (a .env outside git is packed too), so a file's contents, its
download and the zip are for staff only (403 for others); the file tree (paths, sizes and
hashes) is shown to every logged-in user.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from runs.core.sealing import SnapshotFile
from runs.selectors.snapshots import (
    run_snapshot_get,
    run_snapshot_required,
    snapshot_contents,
)
from runs.shared.downloads import attachment, snapshot_zip_response
from runs.web.diffs import size_text
from runs.web.params import flag_param

# A file page decodes at most this many bytes of a file (a file may be 20 MB: decoding and
# splitting it whole took ~900 MB) and shows at most this many lines of them; the download has
# the rest.
MAX_SHOWN_LINES = 5_000
MAX_SHOWN_BYTES = 512 * 1024
EXECUTABLE = 0o755


@dataclass(frozen=True)
class TreeRow:
    """One line of the file tree: a folder (``file`` None) or a file, at its depth."""

    depth: int
    name: str
    file: SnapshotFile | None = None

    @property
    def indent(self) -> str:
        return f"{self.depth * 1.25:g}rem"

    @property
    def executable(self) -> bool:
        return self.file is not None and self.file.mode == EXECUTABLE


def file_tree(files: tuple[SnapshotFile, ...]) -> list[TreeRow]:
    """The files (sorted by path, so a folder's files are together) as an indented tree."""
    rows: list[TreeRow] = []
    opened: list[str] = []
    for entry in files:
        *folders, name = entry.path.split("/")
        shared = 0
        while shared < min(len(opened), len(folders)) and opened[shared] == folders[shared]:
            shared += 1
        opened = opened[:shared]
        for folder in folders[shared:]:
            rows.append(TreeRow(len(opened), folder))
            opened.append(folder)
        rows.append(TreeRow(len(folders), name, entry))
    return rows


@login_required
@require_GET
def run_snapshot(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's "what ran" page: its snapshot's files, each linked to its page (1 query)."""
    run, snapshot = run_snapshot_get(run_id=run_id)
    context = {
        "run": run,
        "snapshot": snapshot,
        "tree": file_tree(snapshot.files) if snapshot else [],
        "total": size_text(snapshot.total_bytes) if snapshot else "",
    }
    return render(request, "runs/run_snapshot.html", context)


@login_required
@require_GET
def run_snapshot_file(request: HttpRequest, run_id: int, path: str) -> HttpResponse:
    """One file of the run's snapshot: its first lines, numbered, or (binary) its size and a
    download; ``?download=1`` the file itself; staff only (2 queries)."""
    staff_required_for_contents(request)
    run, snapshot = run_snapshot_required(run_id=run_id)
    entry = snapshot.file(path)
    if entry is None:
        raise Http404(f"run #{run.pk}'s snapshot has no file {path!r}")
    data = snapshot_contents(wanted={snapshot.id: [entry]})[(snapshot.id, entry.path)]
    if flag_param(request, "download"):
        return attachment(data, entry.path.rsplit("/", 1)[-1], "application/octet-stream")
    text = text_head(data, MAX_SHOWN_BYTES)
    shown, cut = _shown_lines(text or "", whole=len(data) <= MAX_SHOWN_BYTES)
    context = {
        "run": run,
        "snapshot": snapshot,
        "file": entry,
        "size": size_text(entry.size),
        "binary": text is None,
        "shown_count": len(shown),
        "cut": cut,
        "lines_html": numbered_lines(shown),
    }
    return render(request, "runs/run_snapshot_file.html", context)


@login_required
@require_GET
def run_snapshot_zip(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's snapshot as a zip; 404 for a run without one; staff only (2 queries)."""
    staff_required_for_contents(request)
    run, snapshot = run_snapshot_required(run_id=run_id)
    return snapshot_zip_response(run=run, snapshot=snapshot)


def staff_required_for_contents(request: HttpRequest) -> None:
    """403 unless the user is staff: a snapshot's contents may hold secrets."""
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can see the contents of a run's files.")


def text_head(data: bytes, limit: int) -> str | None:
    """The first ``limit`` bytes of the file as text (a character cut at the limit is left
    out), or None for a binary file (a NUL byte, or not UTF-8, in those bytes)."""
    head = data[:limit]
    if b"\0" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Only a character cut at the limit (its first 1-3 bytes at the very end) is forgiven.
        if len(data) > limit and exc.reason == "unexpected end of data":
            return head[: exc.start].decode("utf-8")
        return None


def _shown_lines(text: str, *, whole: bool) -> tuple[list[str], bool]:
    """The first MAX_SHOWN_LINES lines of the text, and whether that is less than the file
    (``whole`` False: the text is only the file's head, whose last line, likely cut, is left
    out unless it is the only one)."""
    lines = text.splitlines()
    if not whole and len(lines) > 1:
        lines.pop()
    return lines[:MAX_SHOWN_LINES], not whole or len(lines) > MAX_SHOWN_LINES


def numbered_lines(lines: list[str]) -> SafeString:
    """The lines as table rows with their numbers, rendered here rather than in the template
    (thousands of rows); every line is escaped by format_html."""
    return format_html_join(
        "\n",
        "{}",
        (
            (
                format_html(
                    '<tr id="L{0}"><td class="ln"><a href="#L{0}">{0}</a></td>'
                    '<td class="src">{1}</td></tr>',
                    number,
                    line,
                ),
            )
            for number, line in enumerate(lines, start=1)
        ),
    )

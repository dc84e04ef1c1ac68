"""Uploaded HoloDeck result files, read for the import page and ``POST /api/v1/imports``.

The upload's size is checked from its Content-Length before its body is read.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import SuspiciousOperation, TooManyFilesSent
from django.http import HttpRequest, UnreadablePostError
from django.http.multipartparser import MultiPartParserError

from runs.services.history import Upload


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
    """The most one upload may unpack to (a zip's members together, or one file)."""
    return int(settings.HOLODECK_IMPORT_MAX_UNPACKED_BYTES)

"""The one guarded zip reader (Django-free): an archive from outside is vetted as a whole, on
what it declares, before anything in it is inflated, and a member is never read past its
declared size. Used by the result-file import (``runs.services.history``) and by the sealed
snapshots (``runs.core.sealing``).

A zip bomb declares small sizes and inflates to gigabytes, or holds millions of members, or
names a member ``../../etc/passwd``. So, with ``ZipLimits``:

- at most ``max_members`` members;
- every member's path relative and staying inside (no absolute path, drive letter or ``..``,
  either slash);
- at most ``max_member_bytes`` declared per member (when set) and ``max_unpacked_bytes`` in
  total;
- a member read at most up to its declared size (zipfile's own check then catches one that
  lies about it).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from runs.core.bytesize import size_text

# What zipfile raises for an archive or a member it cannot read: corrupt, truncated,
# encrypted, or compressed with a method Python lacks.
UNREADABLE = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    ValueError,
    OSError,
    RuntimeError,
    NotImplementedError,
)

_DRIVE = re.compile(r"^[A-Za-z]:")


class ZipRefused(ValueError):
    """An archive refused whole, or a member that cannot be read; the message says why."""


@dataclass(frozen=True)
class ZipLimits:
    """What an archive may declare. ``size_text`` writes the sizes in the messages and
    ``set_by`` names where the total's limit is set (the setting a user can change)."""

    max_members: int
    max_unpacked_bytes: int
    max_member_bytes: int | None = None
    size_text: Callable[[int], str] = field(default=size_text, compare=False)
    set_by: str = ""


def zip_open(data: bytes) -> zipfile.ZipFile:
    """``data`` opened as a zip archive (ZipRefused when it is not one)."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except UNREADABLE as exc:
        raise ZipRefused(f"not a readable zip archive ({exc})") from None


def zip_members(archive: zipfile.ZipFile, limits: ZipLimits) -> list[zipfile.ZipInfo]:
    """The archive's members, in the archive's order, once the whole archive is vetted against
    ``limits`` (ZipRefused naming the first problem); nothing is inflated."""
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise ZipRefused(f"{len(infos):,} members (at most {limits.max_members:,})")
    for info in infos:
        if not is_safe_member_path(info.filename):
            raise ZipRefused(
                f"member {info.filename!r} is not a safe relative path: "
                "it has an absolute or '..' path"
            )
    size = limits.size_text
    if limits.max_member_bytes is not None:
        for info in infos:
            if info.file_size > limits.max_member_bytes:
                raise ZipRefused(
                    f"{info.filename} is {size(info.file_size)}, over the limit of "
                    f"{size(limits.max_member_bytes)} per file"
                )
    unpacked = sum(info.file_size for info in infos)
    if unpacked > limits.max_unpacked_bytes:
        where = f", {limits.set_by}" if limits.set_by else ""
        raise ZipRefused(
            f"it unpacks to {size(unpacked)} (at most {size(limits.max_unpacked_bytes)}{where})"
        )
    return infos


def is_safe_member_path(name: str) -> bool:
    """Relative, and inside the folder it is extracted to, whichever slash it uses."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return not (name.startswith(("/", "\\")) or _DRIVE.match(name) or ".." in parts)


def zip_read(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, read no further than its declared size (which ``zip_members``
    capped), so a member lying about its size cannot expand further. ZipRefused (the
    reason alone) when it cannot be read."""
    try:
        with archive.open(info) as member:
            return member.read(info.file_size)
    except UNREADABLE as exc:
        raise ZipRefused(str(exc)) from None

"""Sealed agent snapshots in the database: store one at launch, unpack one where a run runs.

The packing and the cache are ``runs.core.sealing`` (Django-free); this module keeps the archives
(``AgentSnapshot``, one row per distinct tree) and knows where this machine's cache is
(``HOLODECK_SNAPSHOT_CACHE``).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from runs.core.sealing import PackedSnapshot, SnapshotLimits, unpack
from runs.models import AgentSnapshot


def snapshot_store(*, packed: PackedSnapshot, archive: bytes | None = None) -> AgentSnapshot:
    """The stored snapshot of ``packed``: the existing row when the same tree was stored before
    (two launches of one tree share it), else a new one. ``archive`` is ``packed.to_zip()``
    when the caller has it already.

    Safe under concurrent launches of one tree: the digest is unique, and the launch that loses
    the race reads the winner's row.
    """
    existing = _light().filter(digest=packed.digest).first()
    if existing is not None:
        return existing
    snapshot = packed.snapshot
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction survives a lost race
            return AgentSnapshot.objects.create(
                digest=packed.digest,
                archive=archive if archive is not None else packed.to_zip(),
                manifest=snapshot.manifest(),
                file_count=len(snapshot.files),
                total_bytes=snapshot.total_bytes,
            )
    except IntegrityError:
        return _light().get(digest=packed.digest)


def snapshot_limits() -> SnapshotLimits:
    """The configured limits of a snapshot (``HOLODECK_SNAPSHOT_MAX_*``)."""
    megabyte = 1024 * 1024
    return SnapshotLimits(
        max_files=settings.HOLODECK_SNAPSHOT_MAX_FILES,
        max_file_bytes=settings.HOLODECK_SNAPSHOT_MAX_FILE_MB * megabyte,
        max_total_bytes=settings.HOLODECK_SNAPSHOT_MAX_TOTAL_MB * megabyte,
    )


def snapshot_cache_dir() -> Path:
    """This machine's folder of unpacked snapshots (``HOLODECK_SNAPSHOT_CACHE``)."""
    return Path(settings.HOLODECK_SNAPSHOT_CACHE)


def snapshot_unpacked(*, snapshot_id: int) -> Path:
    """The folder holding the stored snapshot's files on this machine: unpacked (and checked)
    into the cache by the first process that needs it, found there by the others. (A worker
    calls this once per snapshot and process, so reading the archive each time costs little.)"""
    digest, archive = (
        AgentSnapshot.objects.filter(pk=snapshot_id).values_list("digest", "archive").get()
    )
    return unpack(bytes(archive), digest, snapshot_cache_dir())


def snapshot_digest_of(*, snapshot_id: int) -> str:
    return AgentSnapshot.objects.filter(pk=snapshot_id).values_list("digest", flat=True).get()


def _light() -> QuerySet[AgentSnapshot]:
    return AgentSnapshot.objects.defer("archive")

"""Sealed agent snapshots (Django-free): the agent directory as a run runs it (the tree of a
commit read from git's objects, or the working tree), packed into a deterministic zip keyed by
a sha256 digest over its manifest, unpacked into a local cache once per machine, and the diff
between two snapshots."""

from runs.sealing.snapshots import (
    DEFAULT_LIMITS,
    FORMAT,
    MARKER_SUFFIX,
    PackedSnapshot,
    Snapshot,
    SnapshotDiff,
    SnapshotError,
    SnapshotFile,
    SnapshotLimits,
    snapshot_agent,
    snapshot_commit,
    snapshot_diff,
    snapshot_digest,
    snapshot_working_tree,
    unpack,
)

__all__ = [
    "DEFAULT_LIMITS",
    "FORMAT",
    "MARKER_SUFFIX",
    "PackedSnapshot",
    "Snapshot",
    "SnapshotDiff",
    "SnapshotError",
    "SnapshotFile",
    "SnapshotLimits",
    "snapshot_agent",
    "snapshot_commit",
    "snapshot_diff",
    "snapshot_digest",
    "snapshot_working_tree",
    "unpack",
]

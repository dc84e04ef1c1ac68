"""Sealed agent snapshots (Django-free): the agent directory as a run runs it, packed into a
deterministic zip keyed by a sha256 digest over its manifest, unpacked into a local cache once
per machine, and the diff between two snapshots.

- ``tree``: the files of the working tree, or of a commit's tree read from git's objects;
- ``pack``: ``Snapshot``, ``PackedSnapshot`` (to and from the zip), the limits and the digest;
- ``cache``: ``unpack`` into the local cache;
- ``diff``: ``snapshot_diff``.

Importers use the names re-exported here.
"""

from runs.core.sealing.cache import MARKER_SUFFIX, unpack
from runs.core.sealing.diff import SnapshotDiff, snapshot_diff
from runs.core.sealing.pack import (
    DEFAULT_LIMITS,
    FORMAT,
    PackedSnapshot,
    Snapshot,
    SnapshotError,
    SnapshotFile,
    SnapshotLimits,
    snapshot_digest,
)
from runs.core.sealing.tree import snapshot_agent, snapshot_commit, snapshot_working_tree

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

"""A byte count as people read it (Django-free): ``850 bytes``, ``2.9 KB``, ``20 MB``.

The one formatter of file sizes: the snapshot pages and diffs, and the limits' messages of
snapshots and zip archives. Binary units (a KB is 1,024 bytes), one decimal, a trailing ``.0``
dropped (``2 KB``, not ``2.0 KB``).
"""

from __future__ import annotations

KB = 1024
MB = 1024 * KB


def size_text(size: int) -> str:
    """``size`` bytes as text: bytes below a KB, KB below a MB, MB from there on."""
    if size >= MB:
        return f"{size / MB:.1f}".removesuffix(".0") + " MB"
    if size >= KB:
        return f"{size / KB:.1f}".removesuffix(".0") + " KB"
    return f"{size} bytes"

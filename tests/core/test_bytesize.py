"""The one byte-size formatter (runs/core/bytesize.py): snapshots' limits, pages and diffs."""

from __future__ import annotations

import pytest

from runs.core.bytesize import size_text


@pytest.mark.parametrize(
    "size, text",
    [
        (0, "0 bytes"),
        (85, "85 bytes"),
        (1023, "1023 bytes"),
        (1024, "1 KB"),
        (2048, "2 KB"),
        (3000, "2.9 KB"),
        (100_000, "97.7 KB"),
        (1024 * 1024, "1 MB"),
        (21 * 1024 * 1024, "21 MB"),
        (int(1.25 * 1024 * 1024), "1.2 MB"),
    ],
)
def test_a_size_reads_in_bytes_kb_or_mb_without_a_trailing_zero(size: int, text: str) -> None:
    assert size_text(size) == text

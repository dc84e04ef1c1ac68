"""The one guarded zip reader (runs/core/zipguard.py): an archive is vetted whole, on what it
declares, before anything in it is inflated."""

from __future__ import annotations

import io
import zipfile

import pytest

from runs.core.zipguard import ZipLimits, ZipRefused, zip_members, zip_open, zip_read

LIMITS = ZipLimits(max_members=3, max_unpacked_bytes=1000)


def zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def vetted(data: bytes, limits: ZipLimits = LIMITS) -> list[str]:
    with zip_open(data) as archive:
        return [info.filename for info in zip_members(archive, limits)]


def test_an_archive_within_the_limits_lists_its_members_in_order() -> None:
    assert vetted(zip_of({"b.json": b"{}", "a/c.json": b"[]"})) == ["b.json", "a/c.json"]


def test_what_is_not_a_zip_is_refused_as_unreadable() -> None:
    with pytest.raises(ZipRefused, match=r"^not a readable zip archive \("):
        zip_open(b"PK\x03\x04 not really a zip")


def test_too_many_members_are_refused() -> None:
    with pytest.raises(ZipRefused, match=r"^4 members \(at most 3\)$"):
        vetted(zip_of({f"{n}.json": b"{}" for n in range(4)}))


@pytest.mark.parametrize(
    "name", ["../evil.json", "/etc/passwd", "a/../../evil.json", "a\\..\\..\\evil", "C:evil"]
)
def test_a_member_leaving_its_folder_is_refused(name: str) -> None:
    with pytest.raises(ZipRefused, match="is not a safe relative path: it has an absolute or"):
        vetted(zip_of({name: b"x"}))


def test_a_bomb_is_refused_on_its_declared_size_before_it_is_inflated() -> None:
    bomb = zip_of({"bomb.json": b" " * 5_000})
    assert len(bomb) < 200
    with pytest.raises(ZipRefused, match=r"^it unpacks to 4.9 KB \(at most 1000 bytes\)$"):
        vetted(bomb)


def test_the_limits_name_sizes_their_way_and_where_they_are_set() -> None:
    limits = ZipLimits(
        max_members=3,
        max_unpacked_bytes=1_000,
        size_text=lambda n: f"{n / 1_000:.1f} kB",
        set_by="SOME_SETTING",
    )
    with pytest.raises(ZipRefused, match=r"^it unpacks to 5.0 kB \(at most 1.0 kB, SOME_SETTING\)"):
        vetted(zip_of({"bomb.json": b" " * 5_000}), limits)


def test_a_member_over_the_per_file_limit_is_named() -> None:
    limits = ZipLimits(max_members=3, max_unpacked_bytes=10_000, max_member_bytes=1024)
    with pytest.raises(ZipRefused, match=r"^big\.txt is 2 KB, over the limit of 1 KB per file$"):
        vetted(zip_of({"small.txt": b"x", "big.txt": b"x" * 2048}), limits)


def test_a_member_is_read_no_further_than_its_declared_size() -> None:
    with zip_open(zip_of({"a.json": b'{"a": 1}'})) as archive:
        (info,) = zip_members(archive, LIMITS)
        assert zip_read(archive, info) == b'{"a": 1}'
        info.file_size = 3  # a member lying about its size
        with pytest.raises(ZipRefused):
            zip_read(archive, info)  # its CRC no longer matches: refused, never read on

"""Imports are bounded in memory: a JSON list is parsed one EvalRun at a time, and an upload
larger than HOLODECK_IMPORT_MAX_UNPACKED_BYTES is refused by name."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from runs.core.wire.holodeck_io import ReportFormatError, iter_eval_runs
from runs.models import Run
from runs.services import history

pytestmark = pytest.mark.django_db

# docs/operations.md ("Importing"): beside the upload's own bytes, an import holds the file's
# text (its size again, for ASCII JSON) and one EvalRun at a time; allow twice the size.
MEMORY_BOUND = 2


@pytest.fixture
def seed_runs(shared_dir: Path) -> list[dict[str, Any]]:
    return json.loads((shared_dir / "fixtures" / "holodeck" / "seed_runs.json").read_text())


def big_list(seed_runs: list[dict[str, Any]], size: int) -> bytes:
    """A JSON list of about ``size`` bytes: three distinct runs, then copies of the first."""
    first = json.dumps(seed_runs[0])
    copies = size // (len(first) + 2) + 1
    items = [json.dumps(run) for run in seed_runs[:3]] + [first] * (copies - 3)
    return ("[\n" + ",\n".join(items) + "\n]").encode()


# The bound is relative to the file, and so is what it tells apart: the traced peak is about
# 1.7 times the file at every size measured (1.75 at 5 MB, 1.71 at 10, 1.67 at 40, 1.65 at 60:
# the file's text plus a share that grows with it), while a list parsed whole (json.loads, or
# every EvalRun held at once) peaks at 6.4-8.2 times it, alike at 5, 10 and 15 MB. 10 MB (about
# 190 items) tells the two apart as 40 MB did, in 7 s of one core under tracemalloc rather than
# 36-54 s. One process, measured by tracemalloc (not by the clock), so it runs beside the other
# in-process tests rather than in a one-at-a-time group (tests/conftest.py).
def test_a_10_mb_json_list_imports_within_twice_its_size_in_memory(
    seed_runs: list[dict[str, Any]],
) -> None:
    content = big_list(seed_runs, 10_000_000)
    count = content.count(b'"metadata"')
    assert len(content) >= 10_000_000 and count > 150

    # tracemalloc counts every Python allocation (the JSON decoder's and pydantic's included)
    # made from here on; the upload's bytes, already held, are not counted.
    tracemalloc.start()
    try:
        (report,) = history.uploads_import(
            [history.Upload("big.json", content)], max_unpacked_bytes=100_000_000
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    print(f"import of {len(content) / 1e6:.1f} MB: traced peak {peak / 1e6:.1f} MB")
    assert peak <= MEMORY_BOUND * len(content), f"peak {peak / 1e6:.1f} MB"
    assert report.errors == []
    assert len(report.imported) == 3
    assert len(report.already_imported) == count - 3
    assert {run.pk for run in report.already_imported} == {report.imported[0].pk}
    assert Run.objects.count() == 3


def test_a_list_is_parsed_one_item_at_a_time_with_the_same_errors_as_before(
    seed_runs: list[dict[str, Any]],
) -> None:
    text = json.dumps(seed_runs[:2])
    assert len(list(iter_eval_runs(text, "a.json"))) == 2
    assert list(iter_eval_runs(" [ ] ", "a.json")) == []
    for broken, problem in [
        (text[:-1], "invalid JSON at line 1"),
        (text + " x", "Extra data"),
        (text.replace("}, {", "} {", 1), "Expecting ',' delimiter"),
        (json.dumps([seed_runs[0], {"report": 1, "metadata": {}}]), "[1].report"),
        ("[" * 500 + "]" * 500, "nested deeper than"),
    ]:
        with pytest.raises(ReportFormatError) as error:
            list(iter_eval_runs(broken, "a.json"))
        assert problem in str(error.value), (problem, str(error.value)[:300])


def test_a_file_with_a_bad_item_imports_nothing(seed_runs: list[dict[str, Any]]) -> None:
    content = json.dumps([seed_runs[0], {"report": 1}]).encode()
    (report,) = history.uploads_import(
        [history.Upload("bad.json", content)], max_unpacked_bytes=10_000_000
    )
    assert report.imported == [] and report.errors
    assert Run.objects.count() == 0


def test_an_upload_unpacking_beyond_the_cap_is_refused_naming_the_file_and_the_setting(
    seed_runs: list[dict[str, Any]],
) -> None:
    from runs.shared.uploads import max_unpacked_bytes

    content = json.dumps(seed_runs[:3]).encode()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results/a.json", content)
    with override_settings(HOLODECK_IMPORT_MAX_UNPACKED_BYTES=len(content) - 1):
        uploads = [
            history.Upload("runs.json", content),
            history.Upload("r.zip", archive.getvalue()),
        ]
        reports = history.uploads_import(uploads, max_unpacked_bytes=max_unpacked_bytes())
    assert [report.name for report in reports] == ["runs.json", "r.zip"]
    for report in reports:
        assert report.imported == []
        assert "HOLODECK_IMPORT_MAX_UNPACKED_BYTES" in report.errors[0], report.errors
    assert Run.objects.count() == 0

"""Reading and writing HoloDeck result files (`results/<slug>/<timestamp>.json`).

HoloDeck persists one ``EvalRun`` per ``holodeck test`` invocation. We read those unchanged
(plus lists of them, bare ``TestReport`` files from older versions and whole directories) and
write the same shape, so a team can import its history and keep using the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from runs.core.wire.models import EvalRun, EvalRunMetadata, TestReport

_NON_SLUG = re.compile(r"[^a-z0-9-]+")
_REPEATED_DASH = re.compile(r"-+")


class ReportFormatError(ValueError):
    """A result file (or object) is not a HoloDeck EvalRun / TestReport.

    ``source`` names the file (or ``<object>``); ``problems`` holds one line per defect, each
    with its location inside the document, e.g. ``[3].report.results[0].passed: ...``.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source}: not a valid HoloDeck result file:\n{lines}")


def load_eval_runs(
    path_or_obj: str | os.PathLike[str] | dict[str, Any] | list[Any],
) -> list[EvalRun]:
    """Load EvalRuns from a file, a directory (every ``*.json`` below it) or parsed JSON.

    Accepted documents: one EvalRun, a JSON list of EvalRuns, or a bare TestReport (wrapped
    with metadata that only carries its ``holodeck_version``). Directory files load in sorted
    path order. Raises ``ReportFormatError`` naming the file and the offending location.
    """
    if isinstance(path_or_obj, dict | list):
        return _runs_from_document(path_or_obj, "<object>")
    path = Path(path_or_obj)
    if path.is_dir():
        return [run for file in sorted(path.rglob("*.json")) for run in _load_file(file)]
    return _load_file(path)


def dump_eval_run(run: EvalRun, *, holodeck: bool = False) -> str:
    """The run as HoloDeck writes it: 2-space indent, every field present (nulls included),
    non-ASCII escaped like ``json.dumps`` does; our judge-accounting keys only when set.

    ``holodeck``: HoloDeck's exact shape, without our verdict extensions (``outcome``,
    ``kind_outcomes``, ``run_summary``): what a ``results/`` file holds. An export keeps them."""
    return json.dumps(run.model_dump(mode="json", context={"holodeck": holodeck}), indent=2)


def slugify(name: str) -> str:
    """HoloDeck's results-directory slug: lowercase, runs of other characters -> ``-``.

    A name with no usable character (``日本語``, ``!!!``) becomes ``agent``: a result file must
    always have somewhere to go.
    """
    slug = _REPEATED_DASH.sub("-", _NON_SLUG.sub("-", name.lower())).strip("-")
    return slug or "agent"


def timestamp_for_filename(when: datetime | str) -> str:
    """A filesystem-safe timestamp.

    A string (a report's ``timestamp``) gets HoloDeck's rule: every ``:`` becomes ``-``. A
    datetime is rendered in UTC to the second, e.g. ``2026-11-30T04-52-10Z`` (a naive datetime
    is taken to be UTC).
    """
    if isinstance(when, str):
        return when.replace(":", "-")
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")


def result_file_path(
    results_dir: str | os.PathLike[str], agent_name: str, when: datetime | str
) -> Path:
    """``<results_dir>/<slug(agent name)>/<timestamp>.json``, as HoloDeck lays them out."""
    return Path(results_dir) / slugify(agent_name) / f"{timestamp_for_filename(when)}.json"


def write_eval_run(
    run: EvalRun, results_dir: str | os.PathLike[str], when: datetime | str | None = None
) -> Path:
    """Write ``run`` atomically under ``results_dir`` and return the path written.

    ``when`` defaults to the report's timestamp (HoloDeck's choice). An existing file is never
    overwritten: like HoloDeck, a 4-hex suffix is added to the name instead.
    """
    target = result_file_path(results_dir, run.report.agent_name, when or run.report.timestamp)
    target.parent.mkdir(parents=True, exist_ok=True)
    base = target
    while target.exists():
        target = base.with_name(f"{base.stem}-{secrets.token_hex(2)}{base.suffix}")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dump_eval_run(run, holodeck=True))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return target


def load_eval_runs_bytes(content: bytes, source: str) -> list[EvalRun]:
    """Load EvalRuns from the bytes of one result file (an upload); ``source`` names it in
    errors. UTF-8 with or without a byte-order mark."""
    return _runs_from_text(result_text(content, source), source)


def result_text(content: bytes, source: str) -> str:
    """The text of one result file's bytes (UTF-8 with or without a byte-order mark)."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportFormatError(source, [f"not UTF-8 text (byte {exc.start})"]) from None


def iter_eval_runs(text: str, source: str) -> Iterator[EvalRun]:
    """The EvalRuns of one result file's text, one at a time.

    A JSON list is decoded item by item (``json.JSONDecoder.raw_decode`` from each item's
    offset), each validated and handed over before the next is parsed: beside the text, only
    one item's objects are alive, so a 60 MB list never becomes 60 MB of dicts and models at
    once (docs/operations.md, "Importing"). Any other document is one EvalRun or TestReport.
    Raises ReportFormatError at the first defect, naming its location.
    """
    start = _skip_space(text, 0)
    if not text.startswith("[", start):
        yield from _runs_from_text(text, source)
        return
    position, index = _skip_space(text, start + 1), 0
    if text.startswith("]", position):
        _expect_end(text, _skip_space(text, position + 1), source)
        return
    while True:
        item, position = _decode_at(text, position, source)
        if json_depth_exceeds(item, MAX_DEPTH - 1):  # the list itself is one level
            raise ReportFormatError(source, [_TOO_DEEP])
        run = _run_from_item(item, source, f"[{index}]")
        del item  # nothing but the EvalRun outlives this item
        yield run
        del run
        index += 1
        position = _skip_space(text, position)
        if text.startswith(",", position):
            position = _skip_space(text, position + 1)
        elif text.startswith("]", position):
            _expect_end(text, _skip_space(text, position + 1), source)
            return
        else:
            _syntax_error(text, position, source, "Expecting ',' delimiter")


_DECODER = json.JSONDecoder()
_SPACE = json.decoder.WHITESPACE  # type: ignore[attr-defined]


def _skip_space(text: str, position: int) -> int:
    return int(_SPACE.match(text, position).end())


def _decode_at(text: str, position: int, source: str) -> tuple[Any, int]:
    with _json_errors(source):
        return _DECODER.raw_decode(text, position)


@contextlib.contextmanager
def _json_errors(source: str) -> Iterator[None]:
    """JSON that cannot be decoded, as the ReportFormatError saying where and why."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise _invalid_json(source, exc) from None
    except RecursionError:
        raise ReportFormatError(source, [_TOO_DEEP]) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ReportFormatError(source, [f"invalid JSON: {exc}"]) from None


def _invalid_json(source: str, exc: json.JSONDecodeError) -> ReportFormatError:
    return ReportFormatError(
        source, [f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
    )


def _expect_end(text: str, position: int, source: str) -> None:
    if position != len(text):
        _syntax_error(text, position, source, "Extra data")


def _syntax_error(text: str, position: int, source: str, message: str) -> NoReturn:
    raise _invalid_json(source, json.JSONDecodeError(message, text, position))


def _load_file(path: Path) -> list[EvalRun]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportFormatError(str(path), [f"cannot read: {exc}"]) from exc
    return _runs_from_text(text, str(path))


def _runs_from_text(text: str, source: str) -> list[EvalRun]:
    with _json_errors(source):
        document = json.loads(text)
    return _runs_from_document(document, source)


# Real result files nest a dozen levels; anything far deeper is not one, and would exhaust the
# interpreter's stack in validation, hashing or rendering.
MAX_DEPTH = 100
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels: not a result file"


def json_depth_exceeds(document: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists/dicts nest deeper than ``limit`` (iterative: any depth is safe to ask)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if not isinstance(value, dict | list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _runs_from_document(document: Any, source: str) -> list[EvalRun]:
    if json_depth_exceeds(document):
        raise ReportFormatError(source, [_TOO_DEEP])
    if isinstance(document, list):
        return [_run_from_item(item, source, f"[{index}]") for index, item in enumerate(document)]
    return [_run_from_item(document, source, "")]


def _run_from_item(item: Any, source: str, prefix: str) -> EvalRun:
    try:
        if isinstance(item, dict) and "report" in item:
            return EvalRun.model_validate(item)
        if isinstance(item, dict) and "results" in item and "summary" in item:
            report = TestReport.model_validate(item)
            metadata = EvalRunMetadata(holodeck_version=report.holodeck_version)
            return EvalRun(report=report, metadata=metadata)
    except ValidationError as exc:
        raise ReportFormatError(source, _describe(exc, prefix)) from exc
    where = prefix or "document"
    raise ReportFormatError(
        source,
        [f"{where}: expected an EvalRun {{report, metadata}} or a TestReport {{results, summary}}"],
    )


def _describe(exc: ValidationError, prefix: str) -> list[str]:
    return [f"{_location(prefix, error['loc'])}: {error['msg']}" for error in exc.errors()]


def _location(prefix: str, loc: tuple[int | str, ...]) -> str:
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "document"

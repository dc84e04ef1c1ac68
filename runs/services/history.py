"""Import HoloDeck history: result files become finished runs, written by the recorder
(``runs.recorder.run_record``: bulk inserts, a fixed number of queries whatever a run's size).

A file is recognised, not imported again, when the database already holds the run it names
(every export names its run: ``runs.core.wire.round_trip``) or a run with the same content (the
same file imported before, or the result file run_agent wrote for a run it stored)."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from django.db import DataError, IntegrityError, transaction

from runs.core.wire import models as wire
from runs.core.wire.holodeck_io import (
    ReportFormatError,
    iter_eval_runs,
    load_eval_runs,
    result_text,
)
from runs.core.wire.models import holodeck_dump
from runs.core.wire.round_trip import run_identity, summary_contradiction
from runs.core.zipguard import ZipLimits, ZipRefused, zip_members, zip_open, zip_read
from runs.models import AgentProject, Run
from runs.recorder import run_record
from runs.services.review_import import reviews_import

logger = logging.getLogger(__name__)


@dataclass
class ImportOutcome:
    imported: list[Run] = field(default_factory=list)
    already_imported: list[Run] = field(default_factory=list)


def runs_import(
    paths: Iterable[Path], *, project: AgentProject | None = None, user: Any = None
) -> ImportOutcome:
    """Import HoloDeck result files (a file, a list of EvalRuns, or a results/ directory).

    A result already here (the run it names, or the same content) is not imported again.
    ``user``: who imports (the audit entry of the reviews a file carries; None from the CLI).
    """

    outcome = ImportOutcome()
    for path in paths:
        for eval_run in load_eval_runs(path):
            _eval_run_import(eval_run, project=project, outcome=outcome, user=user)
    return outcome


def _eval_run_import(
    eval_run: wire.EvalRun,
    *,
    project: AgentProject | None,
    outcome: ImportOutcome,
    user: Any = None,
) -> None:
    digest = eval_run_hash(eval_run)
    uid = run_identity(eval_run)
    existing = _imported(digest, uid)
    if existing is None:
        try:
            run = run_import(eval_run=eval_run, project=project, source_hash=digest, user=user)
        except IntegrityError:  # a concurrent import of the same file won the race
            existing = _imported(digest, uid)
            if existing is None:
                raise
        else:
            outcome.imported.append(run)
            return
    outcome.already_imported.append(existing)


# --- uploads (the browser's import page and POST /api/v1/imports) ----------------------------

# A zip may hold at most this many members, and unpack to at most max_unpacked_bytes
# (HOLODECK_IMPORT_MAX_UNPACKED_BYTES, by default five times the upload limit): more is refused
# before anything is read (a zip bomb expands a few KB to gigabytes).
ZIP_MAX_MEMBERS = 10_000
# Problems listed per file; a file that fails validation everywhere would list thousands.
MAX_PROBLEMS = 20


@dataclass(frozen=True)
class Upload:
    """One uploaded file: its name as the client sent it, and its bytes."""

    name: str
    content: bytes


@dataclass
class SourceImport:
    """What became of one uploaded result file (or one ``*.json`` inside an uploaded zip)."""

    name: str
    imported: list[Run] = field(default_factory=list)
    already_imported: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class UploadRefused(ValueError):
    """A whole upload is refused (an unsafe or oversized zip); nothing in it is imported."""


def uploads_import(
    uploads: Iterable[Upload],
    *,
    project: AgentProject | None = None,
    max_unpacked_bytes: int,
    user: Any = None,
) -> list[SourceImport]:
    """Import uploaded result files: each an EvalRun, a JSON list of them, a bare TestReport,
    or a ``.zip`` of a results/ directory (every ``*.json`` inside, at any depth).

    Every file is reported on its own: a malformed one lists its problems and the others still
    import; a result already here (the run it names, or the same content) is reported with the
    run holding it.
    """
    reports: list[SourceImport] = []
    for upload in uploads:
        try:
            documents = upload_documents(upload, max_unpacked_bytes=max_unpacked_bytes)
            reports.extend(_document_import(name, read, project, user) for name, read in documents)
        except UploadRefused as exc:
            reports.append(SourceImport(upload.name, errors=[str(exc)]))
    return reports


Document = tuple[str, Callable[[], bytes]]


def upload_documents(upload: Upload, *, max_unpacked_bytes: int) -> Iterator[Document]:
    """The result documents of an upload: the file itself, or the ``*.json`` files of a zip
    (named ``archive.zip/path/inside.json``), each with a function reading its bytes.

    A zip is vetted as a whole before its first member is read: ``UploadRefused`` for an
    unreadable, unsafe or oversized archive.
    """
    if not (upload.name.lower().endswith(".zip") or upload.content.startswith(b"PK\x03\x04")):
        if len(upload.content) > max_unpacked_bytes:
            raise UploadRefused(
                f"file refused: {_megabytes(len(upload.content))} "
                f"(at most {_megabytes(max_unpacked_bytes)}, HOLODECK_IMPORT_MAX_UNPACKED_BYTES)"
            )
        yield upload.name, lambda: upload.content
        return
    try:
        archive = zip_open(upload.content)
    except ZipRefused as exc:
        raise UploadRefused(str(exc)) from None
    with archive:
        members = _zip_json_members(archive, max_unpacked_bytes=max_unpacked_bytes)
        if not members:
            raise UploadRefused("the zip archive holds no *.json file")
        for info in members:
            yield f"{upload.name}/{info.filename}", partial(_zip_read, archive, info)


def _zip_json_members(
    archive: zipfile.ZipFile, *, max_unpacked_bytes: int
) -> list[zipfile.ZipInfo]:
    """The archive's ``*.json`` members, in path order, once the whole archive is vetted
    (``runs.core.zipguard``): no absolute or ``..`` paths, at most ZIP_MAX_MEMBERS members and
    ``max_unpacked_bytes``."""
    limits = ZipLimits(
        max_members=ZIP_MAX_MEMBERS,
        max_unpacked_bytes=max_unpacked_bytes,
        size_text=_megabytes,
        set_by="HOLODECK_IMPORT_MAX_UNPACKED_BYTES",
    )
    try:
        infos = zip_members(archive, limits)
    except ZipRefused as exc:
        raise UploadRefused(f"zip archive refused: {exc}") from None
    return sorted(
        (info for info in infos if _is_result_member(info)), key=lambda info: info.filename
    )


def _is_result_member(info: zipfile.ZipInfo) -> bool:
    path = PurePosixPath(info.filename)
    # macOS archives carry "__MACOSX/._name.json" resource forks beside the real files.
    return (
        not info.is_dir()
        and path.suffix.lower() == ".json"
        and "__MACOSX" not in path.parts
        and not path.name.startswith("._")
    )


def _zip_read(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes (at most its declared size, which the vetting capped)."""

    try:
        return zip_read(archive, info)
    except ZipRefused as exc:  # encrypted, corrupt, or compressed with a method Python lacks
        raise ReportFormatError(info.filename, [f"cannot unpack: {exc}"]) from None


def _document_import(
    name: str, read: Callable[[], bytes], project: AgentProject | None, user: Any = None
) -> SourceImport:
    """Import one result document, streamed: its EvalRuns are parsed one at a time (twice:
    first all validated, so a file with a defect imports nothing, then each imported and let
    go), so memory stays near the document's own size whatever it holds."""

    report = SourceImport(name)
    try:
        text = result_text(read(), name)  # the bytes read are let go here
        count = sum(1 for _ in iter_eval_runs(text, name))
    except ReportFormatError as exc:
        report.errors = _problems(exc.problems)
        return report
    outcome = ImportOutcome()
    for index, eval_run in enumerate(iter_eval_runs(text, name)):
        try:
            _eval_run_import(eval_run, project=project, outcome=outcome, user=user)
        except DataError as exc:  # e.g. a NUL character, which PostgreSQL cannot store
            logger.info("import of %s [%d] refused by the database: %s", name, index, exc)
            where = f"[{index}]" if count > 1 else "document"
            report.errors.append(f"{where}: a value the database cannot store ({exc})".strip())
    report.imported, report.already_imported = outcome.imported, outcome.already_imported
    return report


def _problems(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more problems"]


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def _imported(digest: str, uid: uuid.UUID | None = None) -> Run | None:
    """The run already holding this result: the run the file names (its export), or the run
    imported from the same file or stored by run_agent as it wrote it."""
    if uid is not None:
        named = Run.objects.filter(uid=uid).first()
        if named is not None:
            return named
    return Run.objects.filter(source_hash=digest).order_by("pk").first()


def eval_run_hash(eval_run: wire.EvalRun) -> str:
    canonical = json.dumps(holodeck_dump(eval_run), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_import(
    *,
    eval_run: wire.EvalRun,
    project: AgentProject | None = None,
    source_hash: str = "",
    user: Any = None,
) -> Run:
    """Store a finished HoloDeck report as a Run with its case, turn and metric rows, through
    the recorder, and the reviews our exports carry (``runs.services.review_import``), in one
    transaction.

    Its results are the truth: a summary that contradicts them is replaced by theirs, with a
    warning shown on the run page. A file naming a run (an export) keeps that identity. Reviews
    need a project (their categories are a project's): imported without one, they are not
    kept, and a warning on the run page says so.
    """
    contradiction = summary_contradiction(eval_run.report)
    reviews = eval_run.report.reviews or []
    warnings = [contradiction] if contradiction else []
    if reviews and project is None:
        said = "1 review was" if len(reviews) == 1 else f"{len(reviews)} reviews were"
        warnings.append(
            f"the file's {said} not kept: reviews belong to a project, import the file into one "
            "to keep them"
        )
    with transaction.atomic():
        run = run_record(
            eval_run=eval_run,
            project=project,
            source_hash=source_hash,
            uid=run_identity(eval_run),
            warnings=warnings,
        )
        reviews_import(run=run, reviews=reviews, user=user)
    return run

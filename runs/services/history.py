"""Import HoloDeck history: result files become finished runs (bulk inserts, a fixed number of
queries whatever a run's size). Wire -> rows goes through ``runs.mapping`` like every write."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs.mapping import case_turns, case_values, turn_rows
from runs.models import AgentProject, CaseResult, Run
from runs.recorder import metric_summary, turn_rows_insert
from runs.report import models as wire

logger = logging.getLogger(__name__)


@dataclass
class ImportOutcome:
    imported: list[Run] = field(default_factory=list)
    already_imported: list[Run] = field(default_factory=list)


def runs_import(paths: Iterable[Path], *, project: AgentProject | None = None) -> ImportOutcome:
    """Import HoloDeck result files (a file, a list of EvalRuns, or a results/ directory).

    A result already imported (same content) is not imported again.
    """
    from runs.report.holodeck_io import load_eval_runs

    outcome = ImportOutcome()
    for path in paths:
        for eval_run in load_eval_runs(path):
            _eval_run_import(eval_run, project=project, outcome=outcome)
    return outcome


def _eval_run_import(
    eval_run: wire.EvalRun, *, project: AgentProject | None, outcome: ImportOutcome
) -> None:
    digest = eval_run_hash(eval_run)
    existing = _imported(digest)
    if existing is None:
        try:
            run = run_import(eval_run=eval_run, project=project, source_hash=digest)
        except IntegrityError:  # a concurrent import of the same file won the race
            existing = _imported(digest)
            if existing is None:
                raise
        else:
            outcome.imported.append(run)
            return
    outcome.already_imported.append(existing)


# --- uploads (the browser's import page and POST /api/v1/imports) ----------------------------

# A zip may hold at most this many members, and unpack to at most this many times the upload
# limit: more is refused before anything is read (a zip bomb expands a few KB to gigabytes).
ZIP_MAX_MEMBERS = 10_000
ZIP_MAX_EXPANSION = 5
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
    uploads: Iterable[Upload], *, project: AgentProject | None = None, max_unpacked_bytes: int
) -> list[SourceImport]:
    """Import uploaded result files: each an EvalRun, a JSON list of them, a bare TestReport,
    or a ``.zip`` of a results/ directory (every ``*.json`` inside, at any depth).

    Every file is reported on its own: a malformed one lists its problems and the others still
    import; a result already imported (same content) is reported with the run holding it.
    """
    reports: list[SourceImport] = []
    for upload in uploads:
        try:
            documents = upload_documents(upload, max_unpacked_bytes=max_unpacked_bytes)
            reports.extend(_document_import(name, read, project) for name, read in documents)
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
        yield upload.name, lambda: upload.content
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(upload.content))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UploadRefused(f"not a readable zip archive ({exc})") from None
    with archive:
        members = _zip_json_members(archive, max_unpacked_bytes=max_unpacked_bytes)
        if not members:
            raise UploadRefused("the zip archive holds no *.json file")
        for info in members:
            yield f"{upload.name}/{info.filename}", partial(_zip_read, archive, info)


_DRIVE = re.compile(r"^[A-Za-z]:")


def _zip_json_members(
    archive: zipfile.ZipFile, *, max_unpacked_bytes: int
) -> list[zipfile.ZipInfo]:
    """The archive's ``*.json`` members, in path order, once the whole archive is vetted: no
    absolute or ``..`` paths, at most ZIP_MAX_MEMBERS members and ``max_unpacked_bytes``."""
    infos = archive.infolist()
    if len(infos) > ZIP_MAX_MEMBERS:
        raise UploadRefused(
            f"zip archive refused: {len(infos):,} members (at most {ZIP_MAX_MEMBERS:,})"
        )
    for info in infos:
        parts = PurePosixPath(info.filename.replace("\\", "/")).parts
        if info.filename.startswith(("/", "\\")) or _DRIVE.match(info.filename) or ".." in parts:
            raise UploadRefused(
                f"zip archive refused: member {info.filename!r} has an absolute or '..' path"
            )
    unpacked = sum(info.file_size for info in infos)
    if unpacked > max_unpacked_bytes:
        raise UploadRefused(
            f"zip archive refused: it unpacks to {_megabytes(unpacked)} "
            f"(at most {_megabytes(max_unpacked_bytes)})"
        )
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
    """A member's bytes. Reading stops at its declared size, which the vetting capped, so a
    member lying about its size cannot expand further."""
    from runs.report.holodeck_io import ReportFormatError

    try:
        with archive.open(info) as member:
            return member.read(info.file_size)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError) as exc:
        # encrypted, corrupt, or compressed with a method Python cannot read
        raise ReportFormatError(info.filename, [f"cannot unpack: {exc}"]) from None


def _document_import(
    name: str, read: Callable[[], bytes], project: AgentProject | None
) -> SourceImport:
    from runs.report.holodeck_io import ReportFormatError, load_eval_runs_bytes

    report = SourceImport(name)
    try:
        eval_runs = load_eval_runs_bytes(read(), name)
    except ReportFormatError as exc:
        report.errors = _problems(exc.problems)
        return report
    outcome = ImportOutcome()
    for index, eval_run in enumerate(eval_runs):
        try:
            _eval_run_import(eval_run, project=project, outcome=outcome)
        except DataError as exc:  # e.g. a NUL character, which PostgreSQL cannot store
            logger.info("import of %s [%d] refused by the database: %s", name, index, exc)
            where = f"[{index}]" if len(eval_runs) > 1 else "document"
            report.errors.append(f"{where}: a value the database cannot store ({exc})".strip())
    report.imported, report.already_imported = outcome.imported, outcome.already_imported
    return report


def _problems(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more problems"]


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def _imported(digest: str) -> Run | None:
    """The run already holding this result (imported, or stored by run_agent as it wrote it)."""
    return Run.objects.filter(source_hash=digest).order_by("pk").first()


def eval_run_hash(eval_run: wire.EvalRun) -> str:
    canonical = json.dumps(eval_run.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_import(
    *, eval_run: wire.EvalRun, project: AgentProject | None = None, source_hash: str = ""
) -> Run:
    """Store a finished HoloDeck report as a Run with its case, turn and metric rows.

    The report's own summary is kept as it is (HoloDeck rounds its pass rate its own way).
    """
    report, meta = eval_run.report, eval_run.metadata
    summary = report.summary
    results = report.results
    turn_total = sum(len(r.turns) if r.turns else 1 for r in results)
    usage = [r.token_usage for r in results if r.token_usage]
    when = _parse_time(report.timestamp)
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            source=Run.Source.IMPORT,
            status=Run.Status.PASSED if summary.failed == 0 else Run.Status.FAILED,
            source_hash=source_hash,
            agent_name=report.agent_name,
            agent_config_path=report.agent_config_path,
            git_commit=meta.git_commit or "",
            prompt_version=meta.prompt_version,
            config_snapshot=meta.agent_config,
            holodeck_version=report.holodeck_version,
            environment=report.environment,
            cli_args=meta.cli_args,
            report_timestamp=report.timestamp,
            started_at=when,
            finished_at=when,
            created_at=when or timezone.now(),
            total_cases=summary.total_tests,
            cases_done=summary.total_tests,
            total_turns=turn_total,
            turns_done=turn_total,
            passed_cases=summary.passed,
            failed_cases=summary.failed,
            pass_rate=summary.pass_rate,
            duration_ms=summary.total_duration_ms,
            prompt_tokens=sum(u.prompt_tokens for u in usage),
            completion_tokens=sum(u.completion_tokens for u in usage),
            total_tokens=sum(u.total_tokens for u in usage),
            summary=summary.model_dump(include={"metrics_evaluated", "average_scores"}),
            metric_summary=metric_summary(results),
        )
        _cases_import(run, results)
    return run


def _cases_import(run: Run, results: list[wire.TestResult]) -> None:
    turns_of = [case_turns(result) for result in results]
    cases = CaseResult.objects.bulk_create(
        [
            CaseResult(
                run=run,
                index=index,
                name=result.test_name or "",
                status=CaseResult.Status.DONE,
                enqueued=True,
                is_multi_turn=result.turns is not None,
                **case_values(result, turns),
            )
            for index, (result, turns) in enumerate(zip(results, turns_of, strict=True))
        ]
    )
    if not all(case.pk for case in cases):  # a backend without RETURNING on bulk insert
        by_index = {c.index: c for c in CaseResult.objects.filter(run=run)}
        cases = [by_index[case.index] for case in cases]
    turn_rows_insert(
        [
            pair
            for case, turns in zip(cases, turns_of, strict=True)
            for pair in turn_rows(run_id=run.pk, case=case, turns=turns)
        ]
    )


def _parse_time(value: str) -> Any:
    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed

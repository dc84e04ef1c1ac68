"""Per-turn files -> Markdown with markitdown (sent with that turn only).

pdf (optionally selected ``pages``), image, excel (``sheet`` and ``range``), word, powerpoint
(``pages`` selects slides), csv and text. ``url`` files are downloaded with
``execution.download_timeout`` and cached under ``execution.cache_dir`` when ``cache_enabled``.
A file that cannot be read is recorded with its error on the turn; it never crashes the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.result import error_text
from runs.core.wire.models import ProcessedFileInput

if TYPE_CHECKING:
    from runs.core.agentconfig.agent import ExecutionConfig
    from runs.core.agentconfig.test_cases import FileInput

SUFFIXES = {
    "pdf": ".pdf",
    "image": ".png",
    "excel": ".xlsx",
    "word": ".docx",
    "powerpoint": ".pptx",
    "csv": ".csv",
    "text": ".txt",
}


class FileProcessor:
    def __init__(self, base_dir: Path, execution: ExecutionConfig) -> None:
        self.base_dir = base_dir
        self.execution = execution
        self.cache_dir = base_dir / execution.cache_dir
        self._converter: Any = None

    async def process(self, files: list[FileInput]) -> list[ProcessedFileInput]:
        return [await self.process_one(file) for file in files]

    async def process_one(self, file: FileInput) -> ProcessedFileInput:
        started = time.perf_counter()
        original = file.model_dump(exclude_none=True)
        try:
            path, cached = await self._local_path(file)
            markdown = await asyncio.wait_for(
                asyncio.to_thread(self._convert, file, path), timeout=self.execution.file_timeout
            )
            error = None if markdown.strip() else "no text could be extracted"
        except TimeoutError:
            markdown, cached, error = (
                "",
                None,
                (f"conversion timed out after {self.execution.file_timeout:g}s"),
            )
        except Exception as exc:
            markdown, cached, error = "", None, error_text(exc)
        return ProcessedFileInput(
            original=original,
            markdown_content=markdown,
            metadata={"type": file.type},
            cached_path=cached,
            processing_time_ms=int((time.perf_counter() - started) * 1000),
            error=error,
        )

    async def _local_path(self, file: FileInput) -> tuple[Path, str | None]:
        if file.path:
            path = (self.base_dir / file.path).resolve()
            if not path.exists():
                raise FileNotFoundError(f"{file.path} does not exist")
            return path, None
        assert file.url is not None
        suffix = Path(file.url.split("?")[0]).suffix or SUFFIXES.get(file.type, "")
        target = self.cache_dir / (hashlib.sha256(file.url.encode()).hexdigest()[:32] + suffix)
        use_cache = self.execution.cache_enabled and file.cache is not False
        if use_cache and target.exists():
            return target, str(target)
        data = await asyncio.to_thread(self._download, file.url)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return target, str(target) if use_cache else None

    def _download(self, url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=self.execution.download_timeout) as response:
            data: bytes = response.read()
        return data

    def _convert(self, file: FileInput, path: Path) -> str:
        if file.type == "excel" and file.range:
            return excel_range_markdown(path, file.sheet, file.range)
        if file.type == "text":
            return path.read_text(errors="replace")
        if self._converter is None:
            # lazy: markitdown costs ~1 s at import and most turns send no file
            from markitdown import MarkItDown

            self._converter = MarkItDown()
        text: str = self._converter.convert(str(path)).text_content or ""
        if file.type == "pdf" and file.pages:
            text = select_parts(text.split("\f"), file.pages)
        elif file.type == "powerpoint" and file.pages:
            text = select_parts(re.split(r"(?=<!-- Slide number: \d+ -->)", text)[1:], file.pages)
        elif file.type == "excel" and file.sheet:
            text = excel_sheet_section(text, file.sheet)
        return text


def select_parts(parts: list[str], pages: list[int]) -> str:
    """Pages are 1-based; a page past the end is an error naming it."""
    missing = [page for page in pages if page > len(parts)]
    if missing:
        raise ValueError(f"page(s) {missing} out of range (the document has {len(parts)})")
    return "\n\n".join(parts[page - 1].strip() for page in pages)


def excel_sheet_section(markdown: str, sheet: str) -> str:
    sections = re.split(r"^## ", markdown, flags=re.MULTILINE)
    for section in sections:
        title, _, body = section.partition("\n")
        if title.strip() == sheet:
            return f"## {sheet}\n{body}"
    raise ValueError(f"sheet {sheet!r} not found")


def excel_range_markdown(path: Path, sheet: str | None, cell_range: str) -> str:
    # lazy: openpyxl costs ~0.2 s at import and only an excel file with a range needs it
    from openpyxl import load_workbook

    workbook = load_workbook(path, read_only=True, data_only=True)
    try:
        if sheet is not None and sheet not in workbook.sheetnames:
            raise ValueError(f"sheet {sheet!r} not found")
        worksheet = workbook[sheet] if sheet else workbook.active
        rows = [
            ["" if cell.value is None else str(cell.value) for cell in row]
            for row in worksheet[cell_range]
        ]
    finally:
        workbook.close()
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = [
        "| " + " | ".join(rows[0] + [""] * (width - len(rows[0]))) + " |",
        "|" + " --- |" * width,
    ]
    lines += ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows[1:]]
    return "\n".join(lines)

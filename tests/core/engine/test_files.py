from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runs.core.agentconfig.agent import ExecutionConfig
from runs.core.agentconfig.test_cases import FileInput
from runs.core.engine.executor import Engine
from runs.core.engine.files import FileProcessor
from tests.core.engine.agents import make_agent
from tests.core.engine.documents import write_docx, write_pdf, write_pptx, write_xlsx


def process(tmp_path: Path, **fields: Any) -> Any:
    processor = FileProcessor(tmp_path, ExecutionConfig())
    return asyncio.run(processor.process_one(FileInput(**fields)))


def test_a_pdf_becomes_text_and_pages_select_pages(tmp_path: Path) -> None:
    write_pdf(tmp_path / "f.pdf", ["Revenue was 206588", "Costs were 181001", "Appendix"])
    whole = process(tmp_path, path="f.pdf", type="pdf")
    assert whole.error is None and "Appendix" in whole.markdown_content
    picked = process(tmp_path, path="f.pdf", type="pdf", pages=[2])
    assert "181001" in picked.markdown_content and "206588" not in picked.markdown_content
    beyond = process(tmp_path, path="f.pdf", type="pdf", pages=[9])
    assert "out of range" in beyond.error


def test_an_excel_sheet_and_range_are_extracted(tmp_path: Path) -> None:
    write_xlsx(
        tmp_path / "b.xlsx",
        {
            "Summary": [["year", "cash"], [2014, 206588], [2013, 181001]],
            "Notes": [["note"], ["restated"]],
        },
    )
    sheet = process(tmp_path, path="b.xlsx", type="excel", sheet="Notes")
    assert "restated" in sheet.markdown_content and "206588" not in sheet.markdown_content
    cells = process(tmp_path, path="b.xlsx", type="excel", sheet="Summary", range="A1:B2")
    assert cells.markdown_content.splitlines() == [
        "| year | cash |",
        "| --- | --- |",
        "| 2014 | 206588 |",
    ]
    missing = process(tmp_path, path="b.xlsx", type="excel", sheet="Nope", range="A1:A2")
    assert "not found" in missing.error


def test_word_powerpoint_csv_and_text_files_convert(tmp_path: Path) -> None:
    write_docx(tmp_path / "d.docx", ["Board minutes", "Dividend approved"])
    write_pptx(tmp_path / "s.pptx", ["Q1 results", "Q2 outlook"])
    (tmp_path / "t.csv").write_text("year,cash\n2014,206588\n")
    (tmp_path / "n.txt").write_text("plain notes")
    assert "Dividend approved" in process(tmp_path, path="d.docx", type="word").markdown_content
    slide = process(tmp_path, path="s.pptx", type="powerpoint", pages=[2]).markdown_content
    assert "Q2 outlook" in slide and "Q1 results" not in slide
    assert "206588" in process(tmp_path, path="t.csv", type="csv").markdown_content
    assert process(tmp_path, path="n.txt", type="text").markdown_content == "plain notes"


def test_a_missing_file_is_an_error_on_the_file_not_a_crash(tmp_path: Path) -> None:
    result = process(tmp_path, path="nowhere.pdf", type="pdf")
    assert result.error and "nowhere.pdf" in result.error and result.markdown_content == ""


@pytest.fixture
def file_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b"downloaded notes: 206588"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def test_urls_are_downloaded_once_and_cached(tmp_path: Path, file_server: Any) -> None:
    base, hits = file_server
    first = process(tmp_path, url=f"{base}/notes.txt", type="text")
    second = process(tmp_path, url=f"{base}/notes.txt", type="text")
    assert first.markdown_content == second.markdown_content == "downloaded notes: 206588"
    assert hits == ["/notes.txt"]
    assert first.cached_path and Path(first.cached_path).is_file()


def test_turn_files_are_sent_with_that_turn_only(tmp_path: Path) -> None:
    write_pdf(tmp_path / "f.pdf", ["Revenue was 206588"])
    cases = [
        {
            "name": "c",
            "turns": [
                {"input": "read this", "files": [{"path": "f.pdf", "type": "pdf"}]},
                {"input": "and now?"},
            ],
        }
    ]
    agent = make_agent(tmp_path, cases, {"c": [{"response": "ok"}, {"response": "ok"}]})
    engine = Engine(agent)
    sessions: list[Any] = []
    create = engine.backend.create_session

    async def spy(**kwargs: Any) -> Any:
        sessions.append(await create(**kwargs))
        return sessions[-1]

    engine.backend.create_session = spy  # type: ignore[method-assign]
    result = asyncio.run(engine.run()).results[0]
    first, second = sessions[0].history
    assert "Revenue was 206588" in first and "--- file: f.pdf ---" in first
    assert second == "and now?"
    assert [f.original["path"] for f in result.processed_files] == ["f.pdf"]

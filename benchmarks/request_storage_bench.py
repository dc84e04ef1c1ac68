"""What keeping every model call's request costs in storage, per turn, as a case grows.

    .venv/bin/python benchmarks/request_storage_bench.py [--turns 1 5 20] [--claude]

Runs one case of the tests' calculator agent against the tests' fake server, each turn a tool
call and an answer (two model calls), through the real backend (semantic-kernel; ``--claude``:
the Claude Agent SDK and its bundled CLI too). For each case length it prints the bytes each
turn's transcript stores (as JSON, requests and responses included), their mean per turn, and
what storing each request whole would take instead (every message of the conversation again at
every call: quadratic). A linear store keeps the bytes per turn flat as the case grows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runs.core.backends.base import backend_for
from runs.core.wire.requests import RequestBook
from runs.core.wire.transcripts import transcript_size
from tests.core.backends.agent_files import write_agent
from tests.core.backends.fake_llm_servers import FakeAnthropic, FakeOpenAI


async def case(agent: Any, turns: int) -> list[list[dict[str, Any]]]:
    session = await backend_for(agent).create_session(case_name="bench", case_index=0)
    try:
        outputs = [
            await session.send(f"please subtract 181001 from 206588 (turn {n + 1})")
            for n in range(turns)
        ]
    finally:
        await session.close()
    for output in outputs:
        assert not output.is_error, output.error
    return [output.transcript or [] for output in outputs]


def whole_requests_bytes(transcripts: list[list[dict[str, Any]]]) -> int:
    """Bytes of every model call's request stored whole (rebuilt from the parts)."""
    total = 0
    for index, events in enumerate(transcripts):
        book = RequestBook(e for turn in transcripts[: index + 1] for e in turn)
        for event in events:
            if event.get("type") == "model_call" and isinstance(event.get("request"), dict):
                body = book.body(event["request"])
                total += len(json.dumps(body, ensure_ascii=False).encode())
    return total


def measure(provider: str, turn_counts: list[int]) -> None:
    fake = (FakeAnthropic() if provider == "anthropic" else FakeOpenAI()).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            agent = write_agent(
                Path(tmp) / "agent",
                provider=provider,
                model="claude-sonnet-4-5" if provider == "anthropic" else "gpt-4o-mini",
                endpoint=fake.url if provider == "anthropic" else f"{fake.url}/v1",
            )
            print(f"\n{provider}: bytes stored per turn (transcript JSON, requests included)")
            heads = ("turns", "per turn (mean)", "last turn", "whole requests/turn")
            print(f"{heads[0]:>6} {heads[1]:>16} {heads[2]:>10} {heads[3]:>20}")
            for turns in turn_counts:
                transcripts = asyncio.run(case(agent, turns))
                sizes = [transcript_size(t) for t in transcripts]
                whole = whole_requests_bytes(transcripts)
                print(
                    f"{turns:>6} {sum(sizes) / turns:>16,.0f} {sizes[-1]:>10,} "
                    f"{whole / turns:>20,.0f}"
                )
    finally:
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--claude", action="store_true", help="the Claude Agent SDK too")
    options = parser.parse_args()
    measure("openai", options.turns)
    if options.claude:
        measure("anthropic", options.turns)


if __name__ == "__main__":
    main()

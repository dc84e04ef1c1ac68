"""What one Semantic Kernel session costs to open, against the tests' fake OpenAI server.

    .venv/bin/python benchmarks/sk_session_bench.py [--sessions 50]

Opens ``--sessions`` sessions of the tests' calculator agent one after another (one event loop,
as a worker process runs its cases), sends one message on each and closes it; prints the median
milliseconds of ``create_session``, ``send`` and ``close`` (the first five left out). A session
is a kernel, its chat service and an httpx client of its own (its usage meter's hooks).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runs.core.backends.base import backend_for
from tests.core.backends.agent_files import write_agent
from tests.core.backends.fake_llm_servers import FakeOpenAI

WARM_UP = 5


async def sessions(backend: object, count: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"open": [], "send": [], "close": []}
    for _ in range(count):
        started = time.perf_counter()
        session = await backend.create_session(case_name="bench", case_index=0)  # type: ignore[attr-defined]
        times["open"].append(time.perf_counter() - started)
        started = time.perf_counter()
        output = await session.send("hello there")
        times["send"].append(time.perf_counter() - started)
        assert not output.is_error, output.error
        started = time.perf_counter()
        await session.close()
        times["close"].append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    fake = FakeOpenAI().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            agent = write_agent(
                Path(tmp) / "agent", provider="openai", model="gpt-4o", endpoint=f"{fake.url}/v1"
            )
            times = asyncio.run(sessions(backend_for(agent), args.sessions + WARM_UP))
    finally:
        fake.stop()
    print(
        " · ".join(
            f"{name} {statistics.median(values[WARM_UP:]) * 1000:.2f} ms"
            for name, values in times.items()
        )
    )


if __name__ == "__main__":
    main()

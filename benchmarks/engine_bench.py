"""Engine benchmarks on the ConvFinQA fixture (133 cases, 485 turns), scripted provider.

    .venv/bin/python benchmarks/engine_bench.py [--fixture PATH] [--latency-ms 100]

1. engine only (no database, no Django): turns per second, harness overhead per turn, peak RSS;
2. the same through `manage.py run_agent` (process start, Django, result file; --no-store);
3. with a simulated model latency per call at parallel 1, 4 and 16: efficiency = ideal / measured,
   where ideal = max(total model time / parallel, the longest case).

Each measurement runs in its own process so peak memory is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"

AGENT = """\
name: convfinqa-bench
model:
  provider: scripted
  name: bench
  latency_ms: {latency}
instructions:
  inline: Answer the question about the filing.
evaluations:
  metrics:
    - {{type: standard, metric: numeric, relative_tolerance: 0.01}}
    - {{type: standard, metric: equality, strip_whitespace: true}}
test_cases_file: {fixture}
"""

CHILD = """
import asyncio, json, resource, sys, time
sys.path.insert(0, {repo!r})
from runs.core.agentconfig.loader import load_agent
from runs.core.engine.executor import Engine
started = time.perf_counter()
agent = load_agent({agent!r})
loaded = time.perf_counter()
report = asyncio.run(Engine(agent).run(parallel={parallel}))
done = time.perf_counter()
turns = sum(len(r.turns) if r.turns else 1 for r in report.results)
cases = [len(c.as_turns()) for c in agent.config.test_cases]
print(json.dumps({{"load_s": loaded - started, "run_s": done - loaded, "turns": turns,
                  "cases": len(report.results), "case_turns": cases,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def write_agent(directory: Path, fixture: Path, latency: float) -> Path:
    path = directory / f"agent-{int(latency)}.yaml"
    path.write_text(AGENT.format(latency=latency, fixture=fixture))
    return path


def engine_only(agent: Path, parallel: int) -> dict:
    code = CHILD.format(repo=str(REPO), agent=str(agent), parallel=parallel)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def through_command(agent: Path, results: Path) -> tuple[float, int, int]:
    """Wall time, exit code, and the number of turns in the result file it wrote."""
    env = dict(os.environ, HOLODECK_DATA_DIR=str(results / "data"))
    command = [sys.executable, "manage.py", "run_agent", str(agent), "--no-store", "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--results-dir", str(results)], cwd=REPO, env=env, capture_output=True
    )
    elapsed = time.perf_counter() - started
    (written,) = results.glob("*/*.json")
    report = json.loads(written.read_text())["report"]
    turns = sum(len(result["turns"] or [1]) for result in report["results"])
    return elapsed, done.returncode, turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--parallel", type=int, nargs="*", default=[1, 4, 16])
    args = parser.parse_args()
    if not args.fixture.exists():
        sys.exit(f"fixture not found: {args.fixture}")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        fast = write_agent(tmpdir, args.fixture.resolve(), 0)
        engine_only(fast, 1)  # warm the file cache and .pyc files
        base = engine_only(fast, 1)
        per_turn_ms = base["run_s"] * 1000 / base["turns"]
        print(
            f"engine only, scripted, deterministic metrics, {base['cases']} cases / "
            f"{base['turns']} turns, parallel 1:"
        )
        print(
            f"  load {base['load_s']:.2f}s · run {base['run_s']:.3f}s · "
            f"{base['turns'] / base['run_s']:.0f} turns/s · harness overhead "
            f"{per_turn_ms:.3f} ms/turn · peak RSS {base['peak_rss_mb']:.0f} MB"
        )
        command_s, exit_code, turns = through_command(fast, tmpdir / "results")
        print(
            f"through `manage.py run_agent` (process start + Django + result file): "
            f"{command_s:.2f}s wall, exit {exit_code}, {turns} turns in the result file"
        )
        slow = write_agent(tmpdir, args.fixture.resolve(), args.latency_ms)
        latency_s = args.latency_ms / 1000
        print(f"simulated model latency {args.latency_ms:g} ms per call:")
        for parallel in args.parallel:
            result = engine_only(slow, parallel)
            case_times = [turns * latency_s for turns in result["case_turns"]]
            ideal = max(sum(case_times) / parallel, max(case_times))
            print(
                f"  parallel {parallel:>2}: measured {result['run_s']:.2f}s · ideal "
                f"{ideal:.2f}s · efficiency {ideal / result['run_s'] * 100:.1f}%"
            )


if __name__ == "__main__":
    main()

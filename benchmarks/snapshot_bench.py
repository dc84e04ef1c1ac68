"""Sealed agent snapshots: creating them (working tree and commit), packing, checking and
unpacking, for the ConvFinQA example and a generated 5 MB agent directory.

    .venv/bin/python benchmarks/snapshot_bench.py [--repeat 7]

Each agent is copied into a temporary git repository (one commit, so both the working tree and
the commit can be snapshotted) and measured with ``runs.core.sealing`` only: no Django, no
database. Prints the median of ``--repeat`` runs of each step after one warm-up:

- working tree / commit: ``snapshot_working_tree`` / ``snapshot_commit`` (listing, reading,
  hashing; git subprocesses included);
- to_zip: the deterministic archive stored in the database;
- from_zip: reading an archive back, every hash checked;
- unpack, first: a worker without the directory extracting into an empty cache;
- unpack, cached: a later case on that worker (the marker is found, nothing is read).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runs.core.sealing import (  # noqa: E402
    PackedSnapshot,
    snapshot_commit,
    snapshot_working_tree,
    unpack,
)

WORDS = [
    "revenue",
    "cash",
    "flow",
    "operating",
    "margin",
    "net",
    "income",
    "the",
    "of",
    "and",
    "to",
    "in",
    "filing",
    "table",
    "year",
]


def git(directory: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=b", "-c", "user.email=b@example.com", *args],
        check=True,
        capture_output=True,
    )


def committed(directory: Path) -> Path:
    git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "bench")
    return directory


def generated_agent(directory: Path, files: int = 200, total: int = 5 * 1024 * 1024) -> Path:
    """``files`` text files of mixed sizes (a few large test-case files, many small ones) adding
    up to about ``total`` bytes, in folders like a real agent's."""
    rng = random.Random(16)
    weights = [rng.paretovariate(1.2) for _ in range(files)]
    scale = total / sum(weights)
    folders = ["cases", "prompts", "tools", "graders", "data/inputs"]
    for n, weight in enumerate(weights):
        size = max(64, int(weight * scale))
        text = " ".join(rng.choice(WORDS) for _ in range(size // 4 + 1))[:size]
        path = directory / folders[n % len(folders)] / f"file_{n:03d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if n % 17 == 0:
            path.chmod(0o755)
    (directory / "agent.yaml").write_text("name: generated\n")
    return directory


def median_ms(step: Callable[[], object], repeat: int) -> float:
    step()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(name: str, agent: Path, scratch: Path, repeat: int) -> None:
    packed = snapshot_working_tree(agent)
    data = packed.to_zip()
    caches = iter(range(10**6))

    def unpack_fresh() -> None:
        unpack(data, packed.digest, scratch / f"cache-{next(caches)}")

    warm = scratch / "cache-warm"
    unpack(data, packed.digest, warm)
    steps: dict[str, Callable[[], object]] = {
        "working tree": lambda: snapshot_working_tree(agent),
        "commit": lambda: snapshot_commit(agent, "HEAD"),
        "to_zip": packed.to_zip,
        "from_zip": lambda: PackedSnapshot.from_zip(data, expected_digest=packed.digest),
        "unpack, first": unpack_fresh,
        "unpack, cached": lambda: unpack(data, packed.digest, warm),
    }
    total_kb = packed.snapshot.total_bytes / 1024
    print(
        f"\n{name}: {len(packed.snapshot.files)} files, {total_kb:,.0f} KB, "
        f"archive {len(data) / 1024:,.0f} KB"
    )
    for step_name, step in steps.items():
        print(f"  {step_name:<16} {median_ms(step, repeat):>9.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"median of {args.repeat} after a warm-up")
    with tempfile.TemporaryDirectory(prefix="holodeck-snapshot-bench-") as tmp:
        scratch = Path(tmp)
        example = scratch / "convfinqa"
        shutil.copytree(
            REPO / "examples" / "convfinqa",
            example,
            ignore=shutil.ignore_patterns("results", "__pycache__"),
        )
        measure("examples/convfinqa", committed(example), scratch / "c1", args.repeat)
        big = generated_agent(scratch / "generated")
        measure("generated 5 MB agent", committed(big), scratch / "c2", args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

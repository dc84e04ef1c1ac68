"""benchmarks/peer_bench.sh: the side-by-side benchmark's script (it is run by hand, on a quiet
machine; here only what it does before measuring anything)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "peer_bench.sh"


def test_the_peer_bench_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_the_peer_bench_script_names_a_missing_peer_bench_folder(tmp_path: Path) -> None:
    env = {**os.environ, "PEER_BENCH": str(tmp_path / "nowhere")}

    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )

    assert done.returncode == 2
    assert f"{tmp_path / 'nowhere'}/side_by_side.sh is missing (set PEER_BENCH)" in done.stderr

"""benchmarks/peer_bench.sh and benchmarks/dashboard_peer_bench.sh: the side-by-side benchmarks'
scripts (run by hand, on a quiet machine; here only what they do before measuring anything)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = [
    (BENCHMARKS / "peer_bench.sh", "side_by_side.sh"),
    (BENCHMARKS / "dashboard_peer_bench.sh", "run_peer.sh"),
]


@pytest.mark.parametrize("script, _", SCRIPTS)
def test_a_peer_bench_script_is_valid_bash(script: Path, _: str) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.parametrize("script, needed", SCRIPTS)
def test_a_peer_bench_script_names_a_missing_peer_bench_folder(
    tmp_path: Path, script: Path, needed: str
) -> None:
    env = {**os.environ, "PEER_BENCH": str(tmp_path / "nowhere")}

    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=30
    )

    assert done.returncode == 2
    assert f"{script.stem}: {tmp_path / 'nowhere'}/{needed} is missing (set PEER_BENCH)" in (
        done.stderr
    )

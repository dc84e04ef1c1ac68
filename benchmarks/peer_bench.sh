#!/usr/bin/env bash
# The project's Claude backend side by side with the HoloDeck CLI (holodeck-ai 0.7.1), in one run:
# `../shared/peer-bench/side_by_side.sh` runs `holodeck test` and this checkout's
# `manage.py run_agent` alternately on HoloDeck's own agent.yaml (unchanged), the same ConvFinQA
# dialogues and the same fake Anthropic server, times both whole commands, checks that every turn
# got the same verdict and prints the ratio of their median seconds per turn.
#
#   N_CASES=20 ROUNDS=3 benchmarks/peer_bench.sh
#
# Env: N_CASES (20), ROUNDS (3); PEER_BENCH (../shared/peer-bench next to the checkout);
# HD_VENV, a virtualenv with holodeck-ai==0.7.1 (default .peer-venv in the checkout, made on first
# use with PEER_PYTHON, default python3). Run it on a quiet machine: a ratio holds only when
# both sides run in the same window, which is why both run here, round after round.
set -euo pipefail
NAME=peer_bench NEEDS=side_by_side.sh
# shellcheck source=benchmarks/peer_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/peer_setup.sh"
echo "peer_bench: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), N_CASES=${N_CASES:-20}" \
  "ROUNDS=${ROUNDS:-3}, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
HD_VENV="$HD_VENV" PROJECT_ROOT="$ROOT" N_CASES="${N_CASES:-20}" ROUNDS="${ROUNDS:-3}" \
  bash "$PEER_BENCH/side_by_side.sh"

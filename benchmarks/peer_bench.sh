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
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEER_BENCH="${PEER_BENCH:-$ROOT/../shared/peer-bench}"
if [[ ! -f "$PEER_BENCH/side_by_side.sh" ]]; then
  echo "peer_bench: $PEER_BENCH/side_by_side.sh is missing (set PEER_BENCH)" >&2
  exit 2
fi
HD_VENV="${HD_VENV:-$ROOT/.peer-venv}"
if [[ ! -x "$HD_VENV/bin/holodeck" ]]; then
  echo "peer_bench: installing holodeck-ai==0.7.1 into $HD_VENV (once)"
  "${PEER_PYTHON:-python3}" -m venv "$HD_VENV"
  "$HD_VENV/bin/pip" install -q --disable-pip-version-check holodeck-ai==0.7.1
fi
[[ -x "$ROOT/.venv/bin/python" ]] || python3 "$ROOT/dev.py" setup
# As `dev.py setup` does: the project's modules byte-compiled, as an installed package's are.
"$ROOT/.venv/bin/python" -m compileall -q -j 0 "$ROOT/holodeck_web" "$ROOT/runs" "$ROOT/graders" >/dev/null
echo "peer_bench: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), N_CASES=${N_CASES:-20}" \
  "ROUNDS=${ROUNDS:-3}, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
HD_VENV="$HD_VENV" PROJECT_ROOT="$ROOT" N_CASES="${N_CASES:-20}" ROUNDS="${ROUNDS:-3}" \
  bash "$PEER_BENCH/side_by_side.sh"

#!/usr/bin/env bash
# The dashboard's path side by side with the HoloDeck CLI (holodeck-ai 0.7.1), in one run: each
# round runs `holodeck test` (../shared/peer-bench/run_peer.sh) and then the same agent.yaml,
# test cases and fake Anthropic server through `manage.py serve` (POST /api/v1/runs with a token,
# /progress polled to the end, every turn's verdict read through the API); it prints both s/turn,
# the ratio, the same-verdict count and the time from the launch request to the first turn.
#
#   N_CASES=20 ROUNDS=3 PARALLEL=1 benchmarks/dashboard_peer_bench.sh
#   SERVICES=configured DATABASE_URL=postgres://... REDIS_URL=redis://... benchmarks/dashboard_peer_bench.sh
#
# Env: N_CASES (20), ROUNDS (3), PARALLEL (1: the agent's default), WORKERS (2 worker processes),
# SERVICES (embedded: SQLite and the file-system broker; configured: a fresh database on
# DATABASE_URL's PostgreSQL and a queue of its own on REDIS_URL); PEER_BENCH, HD_VENV and
# PEER_PYTHON as for benchmarks/peer_bench.sh. Run it on a quiet machine.
set -euo pipefail
NAME=dashboard_peer_bench NEEDS=run_peer.sh
# shellcheck source=benchmarks/peer_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/peer_setup.sh"
exec "$ROOT/.venv/bin/python" "$ROOT/benchmarks/dashboard_peer_bench.py" --hd-venv "$HD_VENV" \
  --peer-bench "$PEER_BENCH" --cases "${N_CASES:-20}" --rounds "${ROUNDS:-3}" \
  --parallel "${PARALLEL:-1}" --workers "${WORKERS:-2}" --services "${SERVICES:-embedded}"

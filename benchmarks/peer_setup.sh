# Sourced by benchmarks/peer_bench.sh and benchmarks/dashboard_peer_bench.sh, which set NAME (their
# name, for messages) and NEEDS (the file of ../shared/peer-bench they run). Sets ROOT (the
# checkout), PEER_BENCH (../shared/peer-bench, or $PEER_BENCH) and HD_VENV (a virtualenv with
# holodeck-ai==0.7.1: .peer-venv in the checkout unless set, made on first use with PEER_PYTHON,
# default python3), makes the project's .venv if missing and byte-compiles the project's
# modules, as `dev.py setup` does (an installed package's are).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEER_BENCH="${PEER_BENCH:-$ROOT/../shared/peer-bench}"
if [[ ! -f "$PEER_BENCH/$NEEDS" ]]; then
  echo "$NAME: $PEER_BENCH/$NEEDS is missing (set PEER_BENCH)" >&2
  exit 2
fi
HD_VENV="${HD_VENV:-$ROOT/.peer-venv}"
if [[ ! -x "$HD_VENV/bin/holodeck" ]]; then
  echo "$NAME: installing holodeck-ai==0.7.1 into $HD_VENV (once)"
  "${PEER_PYTHON:-python3}" -m venv "$HD_VENV"
  "$HD_VENV/bin/pip" install -q --disable-pip-version-check holodeck-ai==0.7.1
fi
[[ -x "$ROOT/.venv/bin/python" ]] || python3 "$ROOT/dev.py" setup
"$ROOT/.venv/bin/python" -m compileall -q -j 0 "$ROOT/holodeck_web" "$ROOT/runs" "$ROOT/graders" >/dev/null

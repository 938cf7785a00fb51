#!/usr/bin/env bash
# End-to-end tests of `kvlab serve` with the official openai Python client,
# and of its web page in headless Chromium (Selenium, Debian's chromedriver).
# Creates/uses a venv in ~/.cache/kvlab/e2e-venv, starts the server on a free
# loopback port, waits for /health, runs pytest, and always stops the server.
#   tests/e2e/run.sh [pytest args]     KVLAB_BIN=build-x/kvlab to test another build
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export KVLAB_BIN=${KVLAB_BIN:-$ROOT/build/kvlab}
export KVLAB_E2E_MODEL=${KVLAB_E2E_MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
VENV=${KVLAB_E2E_VENV:-$HOME/.cache/kvlab/e2e-venv}

[ -x "$KVLAB_BIN" ] || { echo "run.sh: $KVLAB_BIN not found (build first or set KVLAB_BIN)" >&2; exit 1; }
[ -f "$KVLAB_E2E_MODEL" ] || { echo "run.sh: $KVLAB_E2E_MODEL not found (scripts/setup.sh)" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -c "import openai, pytest, requests, selenium" 2>/dev/null ||
  "$VENV/bin/pip" install -q openai pytest requests selenium

free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
LOG=$(mktemp /tmp/kvlab-e2e-server.XXXXXX)
"$KVLAB_BIN" serve -m "$KVLAB_E2E_MODEL" --host 127.0.0.1 --port "$PORT" --parallel 4 -c 1024 >"$LOG" 2>&1 &
PID=$!
cleanup() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  rm -f "$LOG"
}
trap cleanup EXIT INT TERM

export KVLAB_E2E_URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 300); do
  if ! kill -0 "$PID" 2>/dev/null; then echo "run.sh: server exited:" >&2; cat "$LOG" >&2; exit 1; fi
  if "$VENV/bin/python" -c "import sys,urllib.request; sys.exit(0 if urllib.request.urlopen('$KVLAB_E2E_URL/health', timeout=1).status == 200 else 1)" 2>/dev/null; then
    break
  fi
  sleep 0.2
done
set +e
"$VENV/bin/python" -m pytest -q "$ROOT/tests/e2e" "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then echo "--- server log ---" >&2; tail -n 50 "$LOG" >&2; fi
exit $rc

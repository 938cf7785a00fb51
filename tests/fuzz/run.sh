#!/usr/bin/env bash
# Runs a fuzz target for a bounded time, seeded with real GGUF headers.
#   tests/fuzz/run.sh BINARY SECONDS
set -euo pipefail
BIN="$1"
SECONDS_LIMIT="${2:-60}"
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)"
CORPUS="$(mktemp -d)"
trap 'rm -rf "$CORPUS"' EXIT
# Seeds: the shared tiny model whole, and the first 64 KiB of the default model
# (its metadata and tensor table; the data is not needed to reach the parser).
cp "$ROOT/../shared/models/stories260K.gguf" "$CORPUS/" 2>/dev/null || true
[[ -f "$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]] &&
  head -c 65536 "$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" >"$CORPUS/smollm2-head.gguf"
"$BIN" "$CORPUS" -max_total_time="$SECONDS_LIMIT" -rss_limit_mb=2048 -max_len=2000000 -timeout=10 \
  -print_final_stats=1 2>&1 | tail -15

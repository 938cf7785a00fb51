#!/usr/bin/env bash
# One command from a fresh clone to the main job: install the packages,
# build in Release, fetch and verify the default model, measure this machine
# once (`kvlab probe`, so the demo can put its runs on the roofline), run
# `kvlab demo`.
#   scripts/setup.sh            # everything, then the demo
#   scripts/setup.sh --no-demo  # stop after the build and the model
set -euo pipefail
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
"$ROOT/scripts/fetch-model.sh"
if [[ "${1:-}" != "--no-demo" ]]; then
  ./build/kvlab probe --if-missing >/dev/null  # its table is the demo's peaks line
  ./build/kvlab demo
fi

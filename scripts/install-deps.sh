#!/usr/bin/env bash
# Installs the Debian packages kvlab builds and tests with. Idempotent: skips
# apt entirely when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libboost-dev                    # Beast and Asio (header-only): kvlab serve's HTTP
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-dev           # libFuzzer and the sanitizer runtimes
  python3 python3-pip python3-venv
  python3-jinja2                  # the reference renderer of the chat-template test (tests/data/chat_templates/)
  gnuplot-nox                     # kvlab simulate --plot
  libjs-chart.js                  # the charts of kvlab serve's web page
  chromium chromium-driver        # the web page's browser test (tests/e2e/test_page.py)
  linux-perf                      # the `perf record` profiles the README quotes
  nginx                           # the load balancer of scripts/serve-cluster.sh
  libnginx-mod-http-js            # njs: its prefix-affinity routing key (deploy/affinity.js)
  prometheus                      # promtool, which lints /metrics (tests/e2e/test_metrics_promtool.py)
  curl                            # serve-cluster.sh waits for /health with it
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

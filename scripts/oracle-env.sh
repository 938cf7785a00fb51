#!/usr/bin/env bash
# Create (or reuse) the llama.cpp reference-oracle virtualenv used to produce
# tests/golden/*.json: llama-cpp-python built from source, plus numpy, plus
# gguf (llama.cpp's own Python GGUF reader and dequantizers, for
# tests/golden/gen_quant_blocks.py).
#
#   scripts/oracle-env.sh
#   ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_golden.py
#
#   scripts/oracle-env.sh --llama-perplexity
#     also builds llama.cpp's own `llama-perplexity` tool from the llama.cpp
#     source the pinned llama-cpp-python sdist vendors (the same llama.cpp as
#     the venv's), with the same flags, into ${VENV}/bin/llama-perplexity: the
#     reference engine of `kvlab perplexity --kl-divergence` (bench/kld).
#     Optional, like the rest of the oracle: no test needs it.
#
# Environment overrides:
#   KVLAB_ORACLE_VENV   venv path                (default: ~/.cache/kvlab/oracle-venv)
#   PYTHON              interpreter for the venv (default: python3)
#   KVLAB_ORACLE_CMAKE_ARGS  replaces the recorded CMAKE_ARGS below (the golden
#                       files record whatever was used; keep the default unless
#                       you know why)
#   KVLAB_ORACLE_CFLAGS replaces the C/C++ flags below (empty: none)
#
# Idempotent: if `import llama_cpp` works in the venv, reports the pinned
# version (and numpy imports), and the venv records the same build flags,
# nothing is rebuilt. The build is CPU-only and
# takes 15-30 minutes on 2 cores; it runs under `nice -n 10` with
# CMAKE_BUILD_PARALLEL_LEVEL=2 (override by exporting it).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
GGUF_PY_VERSION="0.19.0"
# Recorded build configuration of the oracle. GGML_NATIVE=ON: -march=native for
# the ggml CPU backend (same numerics class as a kvlab -march=native build).
DEFAULT_CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
ORACLE_CMAKE_ARGS="${KVLAB_ORACLE_CMAKE_ARGS:-$DEFAULT_CMAKE_ARGS}"
# Without ggml's AMX matmuls: on the Sapphire Rapids VMs this project runs on,
# every batch of more than one token segfaults in ggml_backend_amx_mul_mat
# (llama.cpp issue 20824, open upstream, machine-dependent). -march=native
# would turn them on; an explicit -mno- flag outranks it in GCC, and on a CPU
# without AMX these flags change nothing. kvlab has no AMX kernels either.
DEFAULT_CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
ORACLE_CFLAGS="${KVLAB_ORACLE_CFLAGS-$DEFAULT_CFLAGS}"

VENV="${KVLAB_ORACLE_VENV:-${HOME}/.cache/kvlab/oracle-venv}"
PY="${PYTHON:-python3}"
INFO_FILE="${VENV}/kvlab-oracle-build.env"

WANT_LLAMA_PERPLEXITY=0
case "${1:-}" in
    "") ;;
    --llama-perplexity) WANT_LLAMA_PERPLEXITY=1 ;;
    *) echo "usage: scripts/oracle-env.sh [--llama-perplexity]" >&2; exit 2 ;;
esac

log() { echo "oracle-env: $*" >&2; }
die() { echo "oracle-env: error: $*" >&2; exit 1; }

is_ready() {
    [[ -x "${VENV}/bin/python" ]] || return 1
    "${VENV}/bin/python" - "$LLAMA_CPP_PYTHON_VERSION" <<'EOF' >/dev/null 2>&1
import sys
import numpy  # noqa: F401
import llama_cpp
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
}

# The flags a venv was built with, as its build record states them.
recorded_flags() {
    grep -E '^(CMAKE_ARGS|CFLAGS)=' "$INFO_FILE" 2>/dev/null
}
wanted_flags() {
    printf 'CMAKE_ARGS=%s\nCFLAGS=%s\n' "$ORACLE_CMAKE_ARGS" "$ORACLE_CFLAGS"
}
# Ready, and built with these flags: nothing to do.
is_current() {
    is_ready && [[ "$(recorded_flags)" == "$(wanted_flags)" ]]
}

# gguf is pure Python: added to a ready venv without rebuilding llama.cpp.
ensure_gguf() {
    "${VENV}/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('gguf') != sys.argv[1])" \
        "$GGUF_PY_VERSION" >/dev/null 2>&1 && return 0
    log "installing gguf==${GGUF_PY_VERSION}"
    "${VENV}/bin/python" -m pip install -q --disable-pip-version-check "gguf==${GGUF_PY_VERSION}" \
        || die "pip install of gguf==${GGUF_PY_VERSION} failed"
}

# llama-perplexity, from the vendored llama.cpp of the pinned sdist. Its
# build record (flags and version) decides whether it is current, as the venv's.
LLAMA_PERPLEXITY="${VENV}/bin/llama-perplexity"
llama_perplexity_record() {
    printf 'LLAMA_CPP_PYTHON_VERSION=%s\n' "$LLAMA_CPP_PYTHON_VERSION"
    wanted_flags
}
ensure_llama_perplexity() {
    [[ "$WANT_LLAMA_PERPLEXITY" == 1 ]] || return 0
    if [[ -x "$LLAMA_PERPLEXITY" && "$(cat "${LLAMA_PERPLEXITY}.build.env" 2>/dev/null)" == "$(llama_perplexity_record)" ]]; then
        return 0
    fi
    command -v cmake >/dev/null 2>&1 || die "llama-perplexity needs cmake on the PATH"
    local work="${VENV}/llama-perplexity-src"
    rm -rf -- "$work" && mkdir -p -- "$work"
    log "downloading the llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION} sdist for its vendored llama.cpp"
    "${VENV}/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$work" "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}" || die "pip download of the sdist failed"
    tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
    local src
    src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"
    [[ -f "${src}/tools/perplexity/perplexity.cpp" ]] || die "the sdist has no vendor/llama.cpp/tools/perplexity"
    log "building llama-perplexity (CMAKE_ARGS='${ORACLE_CMAKE_ARGS}', CFLAGS='${ORACLE_CFLAGS}'; ~10 minutes on 2 cores)"
    # shellcheck disable=SC2086  # the recorded args are a word list
    CFLAGS="$ORACLE_CFLAGS" CXXFLAGS="$ORACLE_CFLAGS" \
        cmake -S "$src" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF \
        $ORACLE_CMAKE_ARGS >/dev/null || die "cmake configure of llama.cpp failed"
    nice -n 10 cmake --build "${work}/build" --target llama-perplexity -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        || die "the llama-perplexity build failed"
    install -m 755 "${work}/build/bin/llama-perplexity" "$LLAMA_PERPLEXITY"
    llama_perplexity_record >"${LLAMA_PERPLEXITY}.build.env"
    rm -rf -- "$work"
    log "built ${LLAMA_PERPLEXITY}"
}

if is_current; then
    ensure_gguf
    ensure_llama_perplexity
    echo "oracle-env: ${VENV} ready (llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION})"
    exit 0
fi
if is_ready; then
    log "the venv's recorded build flags are not these; rebuilding"
fi

# Serialise concurrent invocations: the build is long and two at once on a
# 2-core box would thrash.
mkdir -p -- "$(dirname -- "$VENV")"
exec 9>"${VENV}.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
    if is_current; then
        ensure_gguf
        ensure_llama_perplexity
        echo "oracle-env: ${VENV} ready (built by a concurrent run)"
        exit 0
    fi
fi

if [[ ! -x "${VENV}/bin/python" ]]; then
    log "creating venv ${VENV}"
    "$PY" -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
fi

command -v cmake >/dev/null 2>&1 || log "note: no system cmake; pip will use the cmake wheel"
command -v c++ >/dev/null 2>&1 || die "no C++ compiler found (Debian: apt-get install build-essential)"

log "building llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION} from source (CMAKE_ARGS='${ORACLE_CMAKE_ARGS}', CFLAGS='${ORACLE_CFLAGS}')"
log "this takes 15-30 minutes on 2 cores"
rm -f -- "$INFO_FILE"
# --force-reinstall --no-cache-dir: a rebuild with other flags must replace
# the installed build, and not take pip's cached wheel of it.
CMAKE_ARGS="$ORACLE_CMAKE_ARGS" CFLAGS="$ORACLE_CFLAGS" CXXFLAGS="$ORACLE_CFLAGS" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    nice -n 10 "${VENV}/bin/python" -m pip install --disable-pip-version-check \
        --no-binary llama-cpp-python --no-cache-dir --force-reinstall \
        "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}" numpy \
    || die "pip install of llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION} failed"

is_ready || die "llama_cpp does not import (or reports the wrong version) after install"
ensure_gguf

# Record how it was built; tests/golden/gen_golden.py copies this into the
# fixtures' "produced_by".
{
    echo "LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION}"
    echo "CMAKE_ARGS=${ORACLE_CMAKE_ARGS}"
    echo "CFLAGS=${ORACLE_CFLAGS}"
    echo "CXX=$(c++ --version | head -n1)"
    echo "BUILT_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$INFO_FILE"
ensure_llama_perplexity
echo "oracle-env: ${VENV} ready (llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION}, built)"

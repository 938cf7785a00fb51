#!/usr/bin/env python3
"""Known values for kvlab's Q5_0, Q5_1, Q4_K, Q5_K and Q6_K decoders.

llama.cpp quantizes the default model (as f32) to Q4_K_M and Q5_K_M, which
between them hold every one of those formats (SmolLM2's 576-wide rows are not
a whole number of 256-weight K-blocks, so llama.cpp stores those matrices as
Q5_0 / Q5_1). From each format's first tensor the script keeps the first row's
first 256 weights: the raw block bytes, and the floats gguf-py (llama.cpp's
own Python package, an implementation independent of kvlab's) dequantizes
them to. tests/unit/quant_known_values_test.cpp decodes the bytes with kvlab
and compares.

    scripts/oracle-env.sh
    build/kvlab quantize models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smollm2-f32.gguf --type f32
    ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_quant_blocks.py /tmp/smollm2-f32.gguf \
        --keep-dir ~/.cache/kvlab/quantized

--keep-dir keeps the two llama.cpp files (SmolLM2-135M-Instruct.llamacpp-
Q4_K_M.gguf, ...-Q5_K_M.gguf) for the golden generation tests and
gen_golden.py --generate-only, which made their .generate.json fixtures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

import gguf
import llama_cpp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from gen_golden import sha256_file  # noqa: E402

# llama_ftype values (llama.h): the "_M" mixes.
FTYPES = {"Q4_K_M": 15, "Q5_K_M": 17}
WANTED = ["Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
WEIGHTS = 256


def quantize(src: Path, dst: Path, ftype: int) -> None:
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), p) != 0:
        sys.exit(f"llama_model_quantize failed for {dst}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("f32_model", type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("quant_blocks.json"))
    ap.add_argument("--keep-dir", type=Path, help="keep the quantized files here")
    args = ap.parse_args()
    if args.keep_dir:
        args.keep_dir = args.keep_dir.expanduser()
        args.keep_dir.mkdir(parents=True, exist_ok=True)  # llama.cpp does not create it

    blocks = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mix, ftype in FTYPES.items():
            path = (args.keep_dir or Path(tmp)) / f"SmolLM2-135M-Instruct.llamacpp-{mix}.gguf"
            quantize(args.f32_model, path, ftype)
            for t in gguf.GGUFReader(path).tensors:
                name = t.tensor_type.name
                if name not in WANTED or name in blocks:
                    continue
                block_size, block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
                raw = np.asarray(t.data).reshape(-1).view(np.uint8)[: WEIGHTS // block_size * block_bytes]
                values = gguf.quants.dequantize(raw, t.tensor_type).reshape(-1)
                assert values.size == WEIGHTS
                blocks[name] = {
                    "tensor": t.name,
                    "from": mix,
                    "bytes_hex": raw.tobytes().hex(),
                    "values": [float(v) for v in values.astype(np.float32)],
                }
    missing = [w for w in WANTED if w not in blocks]
    if missing:
        sys.exit(f"no tensor of type {missing} in the quantized files")

    out = {
        "produced_by": {
            "what": "first 256 weights of row 0 of the first tensor of each format, as llama.cpp quantized "
            "the f32 default model; values dequantized by gguf-py",
            "llama_cpp_python": llama_cpp.__version__,
            "gguf_py": importlib.metadata.version("gguf"),
            "f32_model_sha256": sha256_file(args.f32_model),
            "command": " ".join(sys.argv),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "blocks": {k: blocks[k] for k in WANTED},
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

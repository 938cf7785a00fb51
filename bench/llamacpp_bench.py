#!/usr/bin/env python3
"""llama-bench-style measurement of llama.cpp through its C API (ctypes).

Run with the oracle venv's interpreter (scripts/oracle-env.sh builds it; there
is no llama-bench binary in the llama-cpp-python package):

    ~/.cache/kvlab/oracle-venv/bin/python bench/llamacpp_bench.py \\
        -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -r 5 -p 512 -n 0 -d 0

One test per call: pp<p> (when -p > 0) or tg<n> (when -n > 0), at KV depth -d.
Prints one JSON object on stdout (the same field names as `kvlab bench -o
json` results, plus what describes the llama.cpp build). bench/vs-llamacpp
calls this once per test, interleaved with kvlab.

Method (kept the same as `kvlab bench`, src/lab/bench/bench.cpp, and llama-bench):
  - one context per test: n_ctx = depth + n_prompt + n_gen, n_batch 2048,
    n_ubatch 512, KV f16 (--kv-type), flash attention off (--flash-attn on),
    n_threads = n_threads_batch = -t, a ggml threadpool attached with poll 50
    (llama-bench's defaults);
  - a warm-up: untimed repetitions for at least 0.5 s (at least one), as
    kvlab bench does;
  - each repetition: clear the KV memory, fill `depth` positions (untimed),
    then time the pp batch (one llama_decode of n_prompt tokens, split by
    n_batch) or n_gen single-token llama_decode calls, then llama_synchronize;
  - token ids are fixed, not sampled: id(i) = ((i + offset) * 7919 + 17) %
    n_vocab, offset = the position of the first token (kvlab's stream), so
    both engines see exactly the same tokens;
  - t/s = tokens / seconds per repetition; mean and sample stddev over reps.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import llama_cpp
from llama_cpp import llama_cpp as C

try:  # silence llama.cpp's load chatter (routed through python logging)
    from llama_cpp import _logger

    _logger.set_verbose(False)
except Exception:  # pragma: no cover
    pass

# llama.cpp commit vendored by each llama-cpp-python release (its CHANGELOG;
# the same table as tests/golden/gen_golden.py). ggml_commit() of the built
# library is reported too.
VENDORED_LLAMA_CPP = {"0.3.36": "ggml-org/llama.cpp@0c1e57098"}

GGML_MAX_N_THREADS = 512  # ggml.h


class ThreadpoolParams(ctypes.Structure):  # struct ggml_threadpool_params (ggml.h)
    _fields_ = [
        ("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


def _lib(name: str) -> ctypes.CDLL:
    return ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / name))


GGML_BASE = _lib("libggml-base.so")
GGML_CPU = _lib("libggml-cpu.so")
LLAMA = _lib("libllama.so")  # the handle llama_cpp already loaded
GGML_BASE.ggml_commit.restype = ctypes.c_char_p
GGML_BASE.ggml_version.restype = ctypes.c_char_p
GGML_BASE.ggml_threadpool_params_init.argtypes = [ctypes.POINTER(ThreadpoolParams), ctypes.c_int]
GGML_BASE.ggml_threadpool_params_init.restype = None
GGML_CPU.ggml_threadpool_new.argtypes = [ctypes.POINTER(ThreadpoolParams)]
GGML_CPU.ggml_threadpool_new.restype = ctypes.c_void_p
GGML_CPU.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
GGML_CPU.ggml_threadpool_free.restype = None
LLAMA.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
LLAMA.llama_attach_threadpool.restype = None


def build_info() -> dict:
    """What was built and how: the version, the vendored commit, the recorded
    CMAKE_ARGS (scripts/oracle-env.sh writes them into the venv)."""
    info = {
        "llama_cpp_python_version": llama_cpp.__version__,
        "llama_cpp_commit": VENDORED_LLAMA_CPP.get(llama_cpp.__version__, "unknown"),
        "ggml_commit": GGML_BASE.ggml_commit().decode(),
        "ggml_version": GGML_BASE.ggml_version().decode(),
    }
    env = Path(sys.prefix) / "kvlab-oracle-build.env"
    if env.is_file():
        for line in env.read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                info[k.strip().lower()] = v.strip()
    info.setdefault("cmake_args", "unrecorded (see scripts/oracle-env.sh)")
    try:
        info["system_info"] = C.llama_print_system_info().decode("utf-8", "replace").strip()
    except Exception:  # pragma: no cover
        pass
    return info


def token_ids(n: int, n_vocab: int, offset: int):
    """kvlab's fixed stream (src/lab/bench/bench.cpp)."""
    arr = (C.llama_token * max(n, 1))()
    for i in range(n):
        arr[i] = ((i + offset) * 7919 + 17) % n_vocab
    return arr


def decode(ctx, ids, n: int, n_batch: int) -> None:
    for start in range(0, n, n_batch):
        m = min(n_batch, n - start)
        view = (C.llama_token * m).from_buffer(ids, start * ctypes.sizeof(C.llama_token))
        rc = C.llama_decode(ctx, C.llama_batch_get_one(view, m))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")


def test_name(n_prompt: int, n_gen: int, depth: int) -> str:
    s = f"pp{n_prompt}" if n_prompt > 0 else f"tg{n_gen}"
    return s + (f" @ d{depth}" if depth > 0 else "")


def run(args) -> dict:
    if (args.n_prompt > 0) == (args.n_gen > 0):
        raise SystemExit("llamacpp_bench: give exactly one of -p N or -n N (> 0)")
    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = C.llama_model_load_from_file(str(args.model).encode(), mp)
    if not model:
        raise SystemExit(f"llamacpp_bench: failed to load {args.model}")
    vocab = C.llama_model_get_vocab(model)
    n_vocab = C.llama_vocab_n_tokens(vocab)

    cp = C.llama_context_default_params()
    cp.n_ctx = args.depth + args.n_prompt + args.n_gen
    cp.n_batch = args.n_batch
    cp.n_ubatch = args.n_ubatch
    cp.n_seq_max = 1
    cp.n_threads = args.threads
    cp.n_threads_batch = args.threads
    cp.type_k = cp.type_v = {"f16": C.GGML_TYPE_F16, "f32": C.GGML_TYPE_F32, "q8_0": C.GGML_TYPE_Q8_0}[args.kv_type]
    cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED if args.flash_attn else C.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.no_perf = True
    ctx = C.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("llamacpp_bench: llama_init_from_model failed")

    threadpool = None
    if args.poll >= 0:  # as llama-bench: an explicit threadpool, attached to the context
        tpp = ThreadpoolParams()
        GGML_BASE.ggml_threadpool_params_init(ctypes.byref(tpp), args.threads)
        tpp.poll = args.poll
        threadpool = GGML_CPU.ggml_threadpool_new(ctypes.byref(tpp))
        if not threadpool:
            raise SystemExit("llamacpp_bench: ggml_threadpool_new failed")
        LLAMA.llama_attach_threadpool(ctx, threadpool, None)

    depth_ids = token_ids(args.depth, n_vocab, 0)
    timed_ids = token_ids(max(args.n_prompt, args.n_gen), n_vocab, args.depth)
    mem = C.llama_get_memory(ctx)

    def once() -> float:
        C.llama_memory_clear(mem, True)
        if args.depth > 0:
            decode(ctx, depth_ids, args.depth, args.n_batch)
            C.llama_synchronize(ctx)
        t0 = time.perf_counter()
        if args.n_prompt > 0:
            decode(ctx, timed_ids, args.n_prompt, args.n_batch)
        else:
            one = (C.llama_token * 1)()
            for i in range(args.n_gen):
                one[0] = timed_ids[i]
                rc = C.llama_decode(ctx, C.llama_batch_get_one(one, 1))
                if rc != 0:
                    raise RuntimeError(f"llama_decode returned {rc}")
        C.llama_synchronize(ctx)
        return time.perf_counter() - t0

    warm0 = time.perf_counter()  # warm-up: page in the weights, settle the clocks (as kvlab bench)
    once()
    while time.perf_counter() - warm0 < 0.5:
        once()
    n_timed = args.n_prompt if args.n_prompt > 0 else args.n_gen
    tok_s = [n_timed / once() for _ in range(args.reps)]
    mean = sum(tok_s) / len(tok_s)
    sd = math.sqrt(sum((x - mean) ** 2 for x in tok_s) / (len(tok_s) - 1)) if len(tok_s) > 1 else 0.0

    C.llama_free(ctx)
    if threadpool:
        GGML_CPU.ggml_threadpool_free(threadpool)
    C.llama_model_free(model)
    return {
        "engine": "llama.cpp",
        "test": test_name(args.n_prompt, args.n_gen, args.depth),
        "n_prompt": args.n_prompt,
        "n_gen": args.n_gen,
        "depth": args.depth,
        "threads": args.threads,
        "kv_type": args.kv_type,
        "flash_attn": bool(args.flash_attn),
        "n_batch": args.n_batch,
        "n_ubatch": args.n_ubatch,
        "poll": args.poll,
        "tok_s": tok_s,
        "mean_tok_s": mean,
        "stddev_tok_s": sd,
        "model": str(args.model),
        "build": build_info(),
        "machine": platform.machine(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", type=Path, required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=0, help="pp test of this many tokens")
    ap.add_argument("-n", "--n-gen", type=int, default=0, help="tg test of this many tokens")
    ap.add_argument("-d", "--depth", type=int, default=0, help="KV depth filled (untimed) before the test")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--kv-type", choices=["f16", "f32", "q8_0"], default="f16",
                    help="KV cache type (a q8_0 V cache needs --flash-attn in llama.cpp)")
    ap.add_argument("--flash-attn", action="store_true", help="enable flash attention (default: off)")
    ap.add_argument("--n-batch", type=int, default=2048, help="logical batch (llama-bench default 2048)")
    ap.add_argument("--n-ubatch", type=int, default=512, help="physical batch (llama-bench default 512)")
    ap.add_argument("--poll", type=int, default=50,
                    help="threadpool polling level 0..100 (llama-bench default 50); -1: no explicit threadpool")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.threads < 1:
        ap.error("-r and -t must be >= 1")
    if args.kv_type == "q8_0" and not args.flash_attn:
        ap.error("llama.cpp quantizes the V cache only with flash attention: add --flash-attn")
    json.dump(run(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

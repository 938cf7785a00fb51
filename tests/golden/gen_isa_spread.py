#!/usr/bin/env python3
"""How far llama.cpp is from itself: its build on this CPU, teacher-forced on
a continuation fixture that another build (another SIMD level) made.

    ~/.cache/kvlab/oracle-venv/bin/python tests/golden/gen_isa_spread.py \
        tests/golden/SmolLM2-135M-Instruct.Q4_1.generate.json models/SmolLM2-135M-Instruct.Q4_1.gguf

llama.cpp's kernels sum in a different order per ISA (AVX2 and AVX-512 split
the f16 attention dot products into 8 or 16 lanes, for one). On a model whose
activations are rounded to 8 bits before every matrix product, that is enough
to move near-ties. This script measures by how much, in the terms kvlab's
golden test uses for kvlab (tests/integration/golden_generation_test.cpp):
each step is fed the fixture's token, and this build's argmax and top-5 logits
are recorded. A case "identical for all 64 ids" here is one where this build,
running free, would have produced the fixture's text.

It writes <fixture-stem>.isa-spread.json next to the fixture (or into
--out-dir). Settings are gen_golden.py's: 1 thread, n_ctx 512, n_batch 512,
flash attention disabled, a fresh context per prompt.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

import gen_golden as gg
from gen_golden import C


def teacher_forced(m: gg.Model, prompt_ids: list[int], forced: list[int]):
    """This build's argmax, top-1/top-2 margin and top-5 at each step, fed the
    fixture's tokens."""
    ctx = m.new_context()
    try:
        picks, margins, top5 = [], [], []
        arr = (C.llama_token * len(prompt_ids))(*prompt_ids)
        if C.llama_decode(ctx, C.llama_batch_get_one(arr, len(prompt_ids))) != 0:
            raise RuntimeError("llama_decode(prompt) failed")
        for step, tok in enumerate(forced):
            logits = m.logits_last(ctx)
            picks.append(int(np.argmax(logits)))
            top2 = np.partition(logits, -2)[-2:]
            margins.append(gg.f32_shortest(np.float32(top2[1]) - np.float32(top2[0])))
            if step < gg.N_TOP_STEPS:
                order = np.lexsort((np.arange(m.n_vocab), -logits))[: gg.TOP_K]
                top5.append([[int(i), gg.f32_shortest(logits[i])] for i in order])
            if step + 1 == len(forced):
                break
            one = (C.llama_token * 1)(tok)
            if C.llama_decode(ctx, C.llama_batch_get_one(one, 1)) != 0:
                raise RuntimeError(f"llama_decode(step {step}) failed")
        return picks, margins, top5
    finally:
        C.llama_free(ctx)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixture", type=Path, help="a .generate.json made by gen_golden.py")
    ap.add_argument("model", type=Path, help="the GGUF file the fixture was made from")
    ap.add_argument("--out-dir", type=Path)
    args = ap.parse_args()

    fixture = json.loads(args.fixture.read_text(encoding="utf-8"))
    sha = gg.sha256_file(args.model)
    if sha != fixture["produced_by"]["model_sha256"]:
        print(f"gen_isa_spread: {args.model} is not the file {args.fixture.name} was made from", file=sys.stderr)
        return 1
    C.llama_backend_init()
    m = gg.Model(args.model.resolve())
    try:
        here = gg.produced_by(m, sha, sys.argv[1:])
        here["command"] = here["command"].replace("gen_golden.py", "gen_isa_spread.py")
        if here["system_info"] == fixture["produced_by"]["system_info"]:
            print("gen_isa_spread: this build has the fixture's SIMD level; nothing to measure", file=sys.stderr)
            return 1
        cases, agreed, steps, identical, errs = [], 0, 0, 0, []
        for c in fixture["cases"]:
            picks, margins, top5 = teacher_forced(m, c["prompt_ids"], c["ids"])
            same = [p == w for p, w in zip(picks, c["ids"])]
            agreed += sum(same)
            steps += len(same)
            identical += all(same)
            for mine, theirs in zip(top5, c["top5"]):
                theirs = dict((t, v) for t, v in theirs)
                errs += [abs(v - theirs[t]) for t, v in mine if t in theirs]
            cases.append({"name": c["name"], "ids": picks, "margins": margins, "top5": top5})
            print(f"  {c['name']}: {sum(same)}/{len(same)} steps agree", file=sys.stderr)
    finally:
        m.close()
    summary = {
        "cases_identical": identical, "cases": len(cases), "steps_agree": agreed, "steps": steps,
        "top5_max_abs_diff": gg.f32_shortest(max(errs)),
        "top5_rms_diff": gg.f32_shortest(math.sqrt(sum(e * e for e in errs) / len(errs))),
    }
    print(f"  {identical}/{len(cases)} cases identical, {agreed}/{steps} steps agree, top-5 logits max |diff| "
          f"{summary['top5_max_abs_diff']}, RMS {summary['top5_rms_diff']}", file=sys.stderr)
    doc = {
        "produced_by": here,
        "fixture": args.fixture.name,
        "fixture_system_info": fixture["produced_by"]["system_info"],
        "settings": {"teacher_forced": "each step is fed the fixture's token; ids, margins and top5 are this "
                                       "build's argmax, top-1/top-2 gap and top-5 logits there",
                     "top5_steps": gg.N_TOP_STEPS, "n_ctx": gg.N_CTX, "n_batch": gg.N_BATCH,
                     "n_threads": gg.N_THREADS, "flash_attn": False},
        "summary": summary,
        "cases": cases,
    }
    stem = args.fixture.name[: -len(".generate.json")]
    gg.write_json((args.out_dir or args.fixture.parent) / f"{stem}.isa-spread.json", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks the include graph of src/ against kvlab's layers.

Every `#include "folder/..."` of a file under src/ must name its own layer or
one below it. The build enforces the same order (each layer's library sees
only the layers it links), but only for the files it compiles with the
headers they happen to include; this test reads every file, and adds two
rules the libraries cannot express: what the server may reach past the
engine, and what the cost model may depend on.

Usage: check_layers.py SRC_DIR
"""
import re
import sys
from pathlib import Path

# Each layer: its folders under src/, and the layers directly below it that
# it may include (and, through them, theirs).
LAYERS = {
    "base": (["common", "tensor", "gguf"], []),
    "kernels": (["kernels"], ["base"]),
    "kv": (["kv"], ["kernels"]),
    "jinja": (["jinja"], ["base"]),
    "tokenizer": (["tokenizer"], ["jinja"]),
    "grammar": (["grammar"], ["base"]),
    "model": (["model"], ["kv"]),
    "engine": (["engine", "sample"], ["model", "tokenizer", "grammar"]),
    "lab": (["lab"], ["engine"]),
    "server": (["server"], ["lab"]),
    "cli": (["cli"], ["server"]),
}

# The server works through the engine and the lab, not the layers under them.
SERVER_FORBIDDEN = ("model/", "kv/", "kernels/")

# The cost model prices a pass from the model's configuration alone, so that
# the simulator can price models kvlab has never loaded.
COST_MODEL = "lab/cost/"
COST_MODEL_ALLOWED = ("common/", "model/config.h", COST_MODEL)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def reachable(layer, seen=None):
    """The layers `layer` may include: itself and everything below it."""
    seen = set() if seen is None else seen
    if layer not in seen:
        seen.add(layer)
        for below in LAYERS[layer][1]:
            reachable(below, seen)
    return seen


def main():
    src = Path(sys.argv[1])
    layer_of = {folder: layer for layer, (folders, _) in LAYERS.items() for folder in folders}
    errors = []
    for path in sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cpp")):
        rel = path.relative_to(src).as_posix()
        layer = layer_of.get(rel.split("/")[0])
        if layer is None:
            errors.append(f"src/{rel}: in no layer (add its folder to LAYERS in {Path(__file__).name})")
            continue
        allowed = reachable(layer)
        text = path.read_text(encoding="utf-8")
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            where = f"src/{rel}:{text.count(chr(10), 0, m.start()) + 1}"
            target = layer_of.get(inc.split("/")[0]) if "/" in inc else None
            if target is None:
                errors.append(f'{where}: "{inc}" is in no layer (include it as "folder/file.h")')
            elif target not in allowed:
                errors.append(f'{where}: {layer} includes "{inc}" from {target}, a layer above it')
            if layer == "server" and inc.startswith(SERVER_FORBIDDEN):
                errors.append(f'{where}: the server includes "{inc}"; it goes through the engine and the lab')
            if rel.startswith(COST_MODEL) and not inc.startswith(COST_MODEL_ALLOWED):
                errors.append(f'{where}: the cost model includes "{inc}"; it may use common/ and model/config.h only')
    for e in errors:
        print(e)
    print(f"{len(errors)} layering error(s)" if errors else "layers: every include goes down")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

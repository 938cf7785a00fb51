#!/usr/bin/env python3
"""Renders every chat template of tests/data/chat_templates/ for every
conversation there, with kvlab's Jinja engine and with Python's jinja2 set up
as Hugging Face's transformers sets it up, and checks that the two agree byte
for byte (a template that raises for a conversation must raise in both).

Usage: check_chat_templates.py KVLAB_JINJA_RENDER DATA_DIR
Prints a table of templates x conversations; exits 1 on any difference, 77
(skip) when jinja2 is not installed.
"""
import json
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

try:
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed (python3-jinja2): skipped")
    sys.exit(77)

# The date strftime_now sees, here and in kvlab_jinja_render.
FIXED_NOW = datetime(2024, 7, 26, 12, 0)


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """raise_exception's error, told apart from jinja2's own."""


if hasattr(jinja2.ext, "Extension"):

    class GenerationBlocks(jinja2.ext.Extension):
        """transformers' AssistantTracker without the tracking: {% generation %}
        blocks render their body unchanged."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()


def transformers_environment():
    """jinja2 as transformers' apply_chat_template compiles templates."""

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlocks, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def contexts(conversations):
    """The variables of each render: transformers passes tools and documents
    (None when absent), the special tokens, and any extra keyword arguments."""
    out = []
    for case in conversations:
        ctx = {"messages": case["messages"], "tools": case.get("tools"), "documents": None,
               "add_generation_prompt": case["add_generation_prompt"], "bos_token": "<s>", "eos_token": "</s>"}
        ctx.update(case.get("kwargs", {}))
        out.append(ctx)
    return out


def render_jinja2(env, source, ctxs):
    try:
        template = env.from_string(source)
    except jinja2.TemplateError as e:
        return [{"error": str(e)}] * len(ctxs)
    results = []
    for ctx in ctxs:
        try:
            results.append({"output": template.render(**ctx)})
        except RaisedByTemplate as e:
            results.append({"error": str(e), "raised": True})
        except (jinja2.TemplateError, TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
    return results


def render_kvlab(binary, template_path, ctxs):
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:
        json.dump(ctxs, f, ensure_ascii=False)
        f.flush()
        done = subprocess.run([binary, str(template_path), f.name], capture_output=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"{template_path.name}: kvlab_jinja_render failed: {done.stderr.decode(errors='replace')}")
    return json.loads(done.stdout)


def main():
    binary, data = sys.argv[1], Path(sys.argv[2])
    conversations = json.loads((data / "conversations.json").read_text(encoding="utf-8"))
    ctxs = contexts(conversations)
    env = transformers_environment()
    names = [c["name"] for c in conversations]
    width = max(len(n) for n in names)
    print(" " * 40 + " ".join(f"{i:>2}" for i in range(len(names))))
    failures = []
    for path in sorted(data.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        expected = render_jinja2(env, source, ctxs)
        got = render_kvlab(binary, path, ctxs)
        marks = []
        for name, want, have in zip(names, expected, got):
            same = ("output" in want and want == have) or ("error" in want and "error" in have)
            # raise_exception's message must come through: "line N: message".
            if same and want.get("raised"):
                same = have["error"].endswith(": " + want["error"])
            marks.append(" =" if same and "output" in want else " E" if same else " X")
            if not same:
                failures.append(f"{path.name} / {name}:\n  jinja2: {json.dumps(want, ensure_ascii=False)[:600]}\n"
                                f"  kvlab:  {json.dumps(have, ensure_ascii=False)[:600]}")
        print(f"{path.stem[:39]:<40}" + " ".join(m.strip().rjust(2) for m in marks))
    for i, n in enumerate(names):
        print(f"{i:>2} {n:<{width}}")
    print("= same text, E both raise, X differ")
    for f in failures:
        print(f)
    print(f"{len(failures)} difference(s)" if failures else "every render matches jinja2")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

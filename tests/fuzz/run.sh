#!/usr/bin/env bash
# Runs a fuzz target for a bounded time, seeded with real inputs of its kind.
#   tests/fuzz/run.sh BINARY SECONDS
# The target is told by its name: fuzz_gguf (GGUF files), fuzz_api (a parser
# selector byte, then a request body or JSON file), fuzz_tokenizer (text),
# fuzz_jinja (templates).
set -euo pipefail
BIN="$1"
SECONDS_LIMIT="${2:-60}"
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)"
CORPUS="$(mktemp -d)"
trap 'rm -rf "$CORPUS"' EXIT
MAX_LEN=4096
case "$(basename "$BIN")" in
  fuzz_gguf)
    # The shared tiny model whole, and the first 64 KiB of the default model
    # (its metadata and tensor table; the data is not needed to reach the parser).
    cp "$ROOT/tests/models/stories260K.gguf" "$CORPUS/" 2>/dev/null || true
    [[ -f "$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]] &&
      head -c 65536 "$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" >"$CORPUS/smollm2-head.gguf"
    MAX_LEN=2000000
    ;;
  fuzz_api)
    # Selector byte (see fuzz_api.cpp), then a valid input of that parser.
    seed() { printf "\\x$(printf %02x "$1")%s" "$2" >"$CORPUS/seed-$1-$3"; }
    seed 0 '{"prompt":"Once upon a time","max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["."],"stream":true,"stream_options":{"include_usage":true}}' a
    seed 0 '{"prompt":[1,403,407],"max_tokens":4,"seed":3,"logit_bias":{"5":1}}' b
    seed 1 '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":4,"n":1}' a
    seed 0 '{"prompt":"Hi","max_tokens":2,"logprobs":3,"echo":false}' c
    seed 0 '{"prompt":"Hi","max_tokens":2,"frequency_penalty":0.5,"presence_penalty":-1,"repeat_last_n":8,"logit_bias":{"7":-100,"42":3.5}}' d
    seed 1 '{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2}' b
    seed 0 '{"prompt":[1,403,407,261],"max_tokens":0,"echo":true,"logprobs":1,"n":3,"temperature":0}' e
    seed 2 '{"prompt":"Tell a story","n":4,"no_kv_cache":true}' a
    seed 3 '{"model":"llama-3.1-8b","hw":"h100","prompt":128,"gen":16,"batch":2,"weights":"q4_0","kv":"q8_0"}' a
    seed 4 '{"ttft_ms":50,"decode_tok_s":2,"prompt_tokens":512,"model":"llama-3.1-8b","hw":"a100-80gb","answer":"decode is memory-bandwidth bound"}' a
    profile="${XDG_CACHE_HOME:-$HOME/.cache}/kvlab/hw-profile.json"
    [[ -f "$profile" ]] && { printf '\x05' >"$CORPUS/seed-5-a"; cat "$profile" >>"$CORPUS/seed-5-a"; }
    seed 6 '{"architectures":["LlamaForCausalLM"],"hidden_size":576,"intermediate_size":1536,"num_attention_heads":9,"num_key_value_heads":3,"num_hidden_layers":30,"vocab_size":49152,"rope_theta":100000,"tie_word_embeddings":true,"max_position_embeddings":8192}' a
    seed 7 '{"content":"Once upon a time <unk> caf\u00e9","add_special":true,"with_pieces":true}' a
    seed 8 '{"tokens":[1,403,407,261,378]}' a
    seed 0 '{"prompt":"x","grammar":"root ::= (\\"a\\" | [0-9]{1,3})+ [^\\\\n]? .*"}' f
    seed 1 '{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]+$"},"b":{"anyOf":[{"$ref":"#/$defs/B"},{"type":"null"}]}},"required":["a"],"$defs":{"B":{"enum":[1,"x"]}}}}}}' c
    seed 1 '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}}],"tool_choice":"auto"}' d
    seed 9 $'root ::= "{" ws (item ("," ws item)*)? "}"\nitem ::= [a-z\u00e9]+ | "(" root ")"\nws ::= " "{0,3}\n%%\n{ ab,\u00e9({})}' a
    MAX_LEN=65536
    ;;
  fuzz_tokenizer)
    # The texts of the golden tokenizer cases (unicode, emoji, code, numbers,
    # whitespace runs, special tokens).
    python3 - "$ROOT/tests/golden" "$CORPUS" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[2])
for i, path in enumerate(sorted(pathlib.Path(sys.argv[1]).glob("*.tokenize.json"))):
    for j, case in enumerate(json.load(open(path))["cases"]):
        (out / f"case-{i}-{j}").write_text(case["text"], encoding="utf-8", errors="surrogateescape")
PY
    ;;
  fuzz_jinja)
    # The chat templates of the jinja2 comparison (tests/data/chat_templates/).
    cp "$ROOT"/tests/data/chat_templates/*.jinja "$CORPUS/"
    MAX_LEN=16384
    ;;
  *) echo "run.sh: unknown fuzz target $BIN" >&2; exit 2 ;;
esac
"$BIN" "$CORPUS" -max_total_time="$SECONDS_LIMIT" -rss_limit_mb=2048 -max_len="$MAX_LEN" -timeout=10 \
  -print_final_stats=1 2>&1 | tail -15

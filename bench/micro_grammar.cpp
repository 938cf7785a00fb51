// The grammar token mask (grammar/token_mask.h) on the default model's
// vocabulary: one step's trie walk from a JSON-mode state, where the states
// differ in how much of the trie survives (a structural position prunes at
// the first byte; inside a string nearly every token fits, and the walk
// takes the looping subtrees whole). Then what constrained decoding adds to
// each decode step, averaged over a real reply: a JSON document replayed
// token by token through the engine's mask (sample/grammar_vocab.h: the
// walk, the copy of the logits row and its masking) and the matcher's
// advance, in JSON mode and against the schema bench/structured-outputs
// uses. items/s is tokens per second of that overhead alone.
//
//   grammar/mask/<state>
//   grammar/replay/<json_object|json_schema>
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "micro_common.h"
#include "sample/grammar_vocab.h"
#include "tokenizer/gguf_vocab.h"

namespace kvlab::bench {
namespace {

const tokenizer::Tokenizer* default_tokenizer() {
  static std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!tok && std::filesystem::exists(default_model_path()))
    tok = tokenizer::tokenizer_from_gguf(gguf::File::open(default_model_path()));
  return tok.get();
}

const grammar::TokenMask* default_vocab_mask() {
  static std::unique_ptr<grammar::TokenMask> mask;
  if (!mask && default_tokenizer()) {
    std::vector<std::string> pieces;
    for (int32_t id = 0; id < default_tokenizer()->n_vocab(); ++id) pieces.push_back(default_tokenizer()->piece(id));
    mask = std::make_unique<grammar::TokenMask>(pieces);
  }
  return mask.get();
}

// bench/structured-outputs' schema, and a reply that follows it.
constexpr const char* kSchema = R"({"type": "object", "additionalProperties": false,
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
                 "hobbies": {"type": "array", "items": {"type": "string"}},
                 "pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog", "fish"]}, "name": {"type": "string"}},
                         "required": ["kind", "name"], "additionalProperties": false}},
  "required": ["name", "age", "city", "hobbies", "pet"]})";
constexpr const char* kReply = R"({"name": "Ann Lee", "age": 31, "city": "Paris", "hobbies": ["chess", "running", "painting"], "pet": {"kind": "cat", "name": "Tom"}})";

std::shared_ptr<const grammar::Grammar> schema_grammar() {
  return std::make_shared<const grammar::Grammar>(
      grammar::parse_gbnf(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema), true)));
}

// `grammar` is called when the benchmark runs, not at registration: other
// files' statics are only sure to be ready then.
void BM_replay(benchmark::State& state, std::shared_ptr<const grammar::Grammar> (*grammar)()) {
  const std::shared_ptr<const grammar::Grammar> g = grammar();
  const tokenizer::Tokenizer* tok = default_tokenizer();
  if (!tok) {
    state.SkipWithError("models/SmolLM2-135M-Instruct.Q4_1.gguf not found (scripts/setup.sh fetches it)");
    return;
  }
  static const sample::GrammarVocab vocab(*tok);
  const std::vector<int32_t> ids = tok->encode(kReply, false, false);
  const std::vector<float> row = random_floats(size_t(tok->n_vocab()), 3);
  std::vector<float> masked;
  std::vector<uint8_t> scratch;
  for (auto _ : state) {
    grammar::Matcher m(g);
    for (int32_t id : ids) {
      masked.assign(row.begin(), row.end());
      benchmark::DoNotOptimize(vocab.mask(m, masked, scratch));
      if (!m.accept(vocab.bytes(id))) state.SkipWithError("the reply left the grammar");
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(ids.size()));
}

void BM_mask(benchmark::State& state, std::string prefix) {
  const grammar::TokenMask* mask = default_vocab_mask();
  if (!mask) {
    state.SkipWithError("models/SmolLM2-135M-Instruct.Q4_1.gguf not found (scripts/setup.sh fetches it)");
    return;
  }
  grammar::Matcher m(grammar::json_object_grammar());
  m.accept(prefix);
  std::vector<uint8_t> allowed;
  int n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(n = mask->allowed(m, allowed));
  state.counters["allowed"] = n;
}

int register_all() {
  for (const auto& [name, prefix] : {std::pair{"start", ""}, std::pair{"after_brace", "{"},
                                     std::pair{"in_string", "{\"name\": \"Tom"}, std::pair{"after_value", "{\"a\": 1"},
                                     std::pair{"in_number", "{\"a\": 12"}, std::pair{"nested", "{\"a\": [{\"b\": [1, "}})
    benchmark::RegisterBenchmark((std::string("grammar/mask/") + name).c_str(), BM_mask, std::string(prefix))
        ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("grammar/replay/json_object", BM_replay, &grammar::json_object_grammar)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("grammar/replay/json_schema", BM_replay, &schema_grammar)->Unit(benchmark::kMillisecond);
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench

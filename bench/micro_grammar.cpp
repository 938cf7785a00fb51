// The grammar token mask (grammar/token_mask.h) on the default model's
// vocabulary: one step's trie walk from a JSON-mode state, where the states
// differ in how much of the trie survives (a structural position prunes at
// the first byte; inside a string nearly every token fits, and the walk
// takes the looping subtrees whole).
//
//   grammar/mask/<state>
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "grammar/json_grammar.h"
#include "grammar/token_mask.h"
#include "micro_common.h"
#include "tokenizer/gguf_vocab.h"

namespace kvlab::bench {
namespace {

const grammar::TokenMask* default_vocab_mask() {
  static std::unique_ptr<grammar::TokenMask> mask;
  if (!mask && std::filesystem::exists(default_model_path())) {
    const auto file = gguf::File::open(default_model_path());
    const auto tok = tokenizer::tokenizer_from_gguf(file);
    std::vector<std::string> pieces;
    for (int32_t id = 0; id < tok->n_vocab(); ++id) pieces.push_back(tok->piece(id));
    mask = std::make_unique<grammar::TokenMask>(pieces);
  }
  return mask.get();
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
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench

// libFuzzer target for the text kvlab parses from outside: the server's
// request bodies, the JSON files the simulator reads, and GBNF grammars with
// a text the matcher then runs over. The first byte picks
// the parser, the rest is its input. Each must give a result or its
// documented error (ApiException for a request body, kvlab::Error for a bad
// value, name or file): any other exception would reach the HTTP layer as a
// 500, which OpenAI clients retry. The sanitizers catch crashes, overflows and
// unbounded allocations.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/error.h"
#include "gguf/file.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "lab/hardware/hw_profile.h"
#include "lab/simulate/model_catalog.h"
#include "server/lab.h"
#include "server/openai_api.h"
#include "server/perf_api.h"
#include "server/tokenize_api.h"
#include "tokenizer/gguf_vocab.h"

namespace {

// Prompts are tokenized with a real vocabulary: the shared tiny model's.
const kvlab::tokenizer::Tokenizer& vocab_tokenizer() {
  static const std::unique_ptr<kvlab::tokenizer::Tokenizer> tok = kvlab::tokenizer::tokenizer_from_gguf(
      kvlab::gguf::File::open(KVLAB_SOURCE_DIR "/tests/models/stories260K.gguf"));
  return *tok;
}

// "GRAMMAR\n%%\nTEXT": the grammar compiled, then the text fed byte by byte.
void run_grammar(const std::string& input) {
  const size_t split = input.find("\n%%\n");
  auto g = std::make_shared<const kvlab::grammar::Grammar>(kvlab::grammar::parse_gbnf(input.substr(0, split)));
  if (split == std::string::npos) return;
  kvlab::grammar::Matcher m(g);
  for (size_t i = split + 4; i < input.size(); ++i)
    if (!m.accept(input.substr(i, 1))) break;
  (void)m.can_end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvlab;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const server::ApiLimits api{"stories260K", 512};
  const server::LabLimits lab{512, 1};
  try {
    switch (data[0] % 10) {
      case 0: (void)server::parse_request(server::Endpoint::Completions, text, vocab_tokenizer(), api); break;
      case 1: (void)server::parse_request(server::Endpoint::Chat, text, vocab_tokenizer(), api); break;
      case 2: (void)server::parse_phases(text, vocab_tokenizer(), lab); break;
      case 3: (void)server::simulate_request(text); break;
      case 4: (void)server::diagnose_request(text); break;
      case 5: (void)perf::parse_hw_profile(text, "fuzz.json"); break;
      case 6: (void)perf::parse_hf_config(text, "config.json"); break;
      case 7: (void)server::tokenize_request(text, vocab_tokenizer()); break;
      case 8: (void)server::detokenize_request(text, vocab_tokenizer()); break;
      default: run_grammar(text); break;
    }
  } catch (const server::ApiException&) {
  } catch (const Error&) {
  }
  return 0;
}

// JSON mode over a vocabulary: before each draw, every token whose bytes
// would take the text out of the JSON grammar (sample/json_prefix.h) gets a
// logit of -inf, so the sampler, whatever its settings, can only pick tokens
// that keep the text the start of a JSON object, as vLLM's guided decoding
// masks logits before sampling.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sample/json_prefix.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::sample {

class JsonVocab {
 public:
  explicit JsonVocab(const tokenizer::Tokenizer& tok);
  // Sets the logits of the tokens that cannot follow `state` to -inf and
  // returns how many can. Tokens without bytes (control tokens, end of
  // generation) never can: the text ends when the object closes.
  int mask(const JsonPrefix& state, std::span<float> logits) const;
  std::string_view bytes(int32_t id) const;

 private:
  std::vector<uint32_t> offsets_;  // token i's bytes: bytes_[offsets_[i] .. offsets_[i + 1])
  std::string bytes_;
  // The tokens by their first byte: one refused first byte rules out its
  // whole list, which outside strings is nearly every list.
  std::vector<int32_t> by_first_[256];
  std::vector<int32_t> empty_;  // tokens without bytes
  // Printable ASCII without '"' and '\\': inside a plain string such a
  // token is always taken, and needs no walk through its bytes.
  std::vector<bool> plain_;
};

}  // namespace kvlab::sample

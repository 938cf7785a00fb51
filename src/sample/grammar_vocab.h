// Constrained decoding over a vocabulary: before each draw, every token
// whose bytes the grammar refuses (grammar/token_mask.h) gets a logit of
// -inf, so the sampler, whatever its settings, can only pick tokens that
// keep the text a prefix of the grammar's language, as vLLM's guided
// decoding and llama.cpp's grammar sampler mask logits before sampling.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::sample {

class GrammarVocab {
 public:
  explicit GrammarVocab(const tokenizer::Tokenizer& tok);
  // Sets the logits of the tokens that cannot follow the matcher's text to
  // -inf and returns how many can. End-of-generation tokens can only where
  // the text is a whole string of the language; other tokens without bytes
  // (control tokens) never can. `allowed` is scratch space.
  int mask(const grammar::Matcher& m, std::span<float> logits, std::vector<uint8_t>& allowed) const;
  std::string_view bytes(int32_t id) const { return trie_.bytes(id); }

 private:
  grammar::TokenMask trie_;
  std::vector<int32_t> end_ids_;
};

}  // namespace kvlab::sample

#include "sample/grammar_vocab.h"

#include <limits>

namespace kvlab::sample {
namespace {

std::vector<std::string> pieces(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> out;
  out.reserve(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) out.push_back(tok.piece(id));
  return out;
}

}  // namespace

GrammarVocab::GrammarVocab(const tokenizer::Tokenizer& tok) : trie_(pieces(tok)) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_end_of_generation(id)) end_ids_.push_back(id);
}

int GrammarVocab::mask(const grammar::Matcher& m, std::span<float> logits, std::vector<uint8_t>& allowed) const {
  int n = trie_.allowed(m, allowed);
  if (m.can_end())
    for (int32_t id : end_ids_) {
      n += !allowed[size_t(id)];
      allowed[size_t(id)] = 1;
    }
  constexpr float kOut = -std::numeric_limits<float>::infinity();
  for (size_t id = 0; id < logits.size(); ++id)
    if (id >= allowed.size() || !allowed[id]) logits[id] = kOut;  // past the vocabulary too
  return n;
}

}  // namespace kvlab::sample

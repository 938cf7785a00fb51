#include "sample/json_mode.h"

#include <limits>

namespace kvlab::sample {

JsonVocab::JsonVocab(const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  offsets_.reserve(size_t(n) + 1);
  plain_.resize(size_t(n));
  offsets_.push_back(0);
  for (int32_t id = 0; id < n; ++id) {
    const std::string p = tok.piece(id);
    bool plain = !p.empty();
    for (char ch : p) plain = plain && ch >= 0x20 && ch <= 0x7e && ch != '"' && ch != '\\';
    plain_[size_t(id)] = plain;
    (p.empty() ? empty_ : by_first_[uint8_t(p[0])]).push_back(id);
    bytes_ += p;
    offsets_.push_back(uint32_t(bytes_.size()));
  }
}

std::string_view JsonVocab::bytes(int32_t id) const {
  return std::string_view(bytes_).substr(offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
}

int JsonVocab::mask(const JsonPrefix& state, std::span<float> logits) const {
  constexpr float kOut = -std::numeric_limits<float>::infinity();
  for (int32_t id : empty_)
    if (size_t(id) < logits.size()) logits[size_t(id)] = kOut;
  for (size_t id = offsets_.size() - 1; id < logits.size(); ++id) logits[id] = kOut;  // past the vocabulary
  const bool plain_string = state.in_plain_string();
  int allowed = 0;
  for (int first = 0; first < 256; ++first) {
    const std::vector<int32_t>& ids = by_first_[first];
    if (ids.empty()) continue;
    JsonPrefix after_first = state;
    const bool taken = after_first.feed(uint8_t(first));
    for (int32_t id : ids) {
      if (size_t(id) >= logits.size()) continue;
      bool ok = taken && plain_string && plain_[size_t(id)];
      if (taken && !ok) {
        JsonPrefix next = after_first;
        ok = next.feed(bytes(id).substr(1));
      }
      if (ok) ++allowed;
      else logits[size_t(id)] = kOut;
    }
  }
  return allowed;
}

}  // namespace kvlab::sample

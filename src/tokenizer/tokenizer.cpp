// Tokenizer factory and the parts shared by every model: vocabulary checks,
// special-token partitioning (llama.cpp's tokenizer_st_partition), pieces,
// decode, end-of-generation and the streaming UTF-8 decoder.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace kvlab::tokenizer {

namespace detail {

namespace {

uint16_t attr_of_type(int32_t type) {
  switch (TokenType(type)) {
    case TokenType::Normal:
      return kAttrNormal;
    case TokenType::Unknown:
      return kAttrUnknown;
    case TokenType::Control:
      return kAttrControl;
    case TokenType::UserDefined:
      return kAttrUserDefined;
    case TokenType::Unused:
      return kAttrUnused;
    case TokenType::Byte:
      return kAttrByte;
  }
  return kAttrUndefined;  // unknown type values decode to nothing, as in llama.cpp
}

void check_special_id(const char* what, int32_t id, size_t n) {
  if (id < -1 || (id >= 0 && size_t(id) >= n))
    throw Error(std::string("tokenizer: ") + what + " token id " + std::to_string(id) +
                " is out of range (vocabulary has " + std::to_string(n) + " tokens)");
}

// "<0xAB>" -> 0xAB, or -1 when the text is not a byte token.
int parse_byte_token(const std::string& t) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

bool is_eog_text(std::string_view t) {
  // llama.cpp's end-of-generation texts (llama-vocab.cpp, special_eog_ids),
  // without its model-specific exceptions: end-of-turn / end-of-text markers,
  // plus the fill-in-the-middle pad / repo / file-separator tokens it also
  // stops on (SmolLM2's "<reponame>" is one).
  static constexpr std::array<std::string_view, 26> kEog = {
      // end of turn / end of text
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
      "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "</s>", "<eos>",
      "<｜end▁of▁sentence｜>",  // DeepSeek (fullwidth bars, U+2581)
      // fill-in-the-middle pad / repo name / file separator
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
      "<REPO>", "<reponame>", "<|file_sep|>"};
  return std::find(kEog.begin(), kEog.end(), t) != kEog.end();
}

TokenizerBase::TokenizerBase(Vocab v) : vocab_(std::move(v)) {
  const size_t n = vocab_.tokens.size();
  if (n == 0) throw Error("tokenizer: vocabulary has no tokens");
  if (n > size_t(INT32_MAX)) throw Error("tokenizer: vocabulary is too large");
  if (!vocab_.scores.empty() && vocab_.scores.size() != n)
    throw Error("tokenizer: " + std::to_string(vocab_.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  if (!vocab_.types.empty() && vocab_.types.size() != n)
    throw Error("tokenizer: " + std::to_string(vocab_.types.size()) + " token types for " + std::to_string(n) +
                " tokens");
  check_special_id("BOS", vocab_.bos, n);
  check_special_id("EOS", vocab_.eos, n);
  check_special_id("EOT", vocab_.eot, n);
  check_special_id("UNK", vocab_.unk, n);
  check_special_id("PAD", vocab_.pad, n);
  if (vocab_.add_bos && vocab_.bos < 0) throw Error("tokenizer: add_bos_token is set but there is no BOS token");
  if (vocab_.add_eos && vocab_.eos < 0) throw Error("tokenizer: add_eos_token is set but there is no EOS token");

  attr_.resize(n);
  ids_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = vocab_.tokens[i];
    // llama.cpp renames empty tokens so that they stay distinct and findable.
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
    attr_[i] = vocab_.types.empty() ? uint16_t(kAttrNormal) : attr_of_type(vocab_.types[i]);
    if (is_eog_text(text)) attr_[i] |= kAttrControl;
  }
  for (size_t i = 0; i < n; ++i) {
    auto [it, fresh] = ids_.emplace(std::string_view(vocab_.tokens[i]), int32_t(i));
    if (!fresh)
      throw Error("tokenizer: duplicate token '" + vocab_.tokens[i] + "' (ids " + std::to_string(it->second) + " and " +
                  std::to_string(i) + ")");
    if (attr_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_.push_back(int32_t(i));
  }
  // Longest first, so "<|im_start|>" wins over a shorter token it contains.
  std::stable_sort(special_.begin(), special_.end(),
                   [&](int32_t a, int32_t b) { return vocab_.tokens[a].size() > vocab_.tokens[b].size(); });
}

void TokenizerBase::build_piece_cache() {
  pieces_.resize(vocab_.tokens.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const std::string& text = vocab_.tokens[i];
    const uint16_t a = attr_[i];
    if (a & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      pieces_[i] = text;  // special tokens render as their literal text
    } else if (a & kAttrNormal) {
      pieces_[i] = normal_piece(text);
    } else if (a & kAttrByte) {
      const int b = parse_byte_token(text);
      if (b >= 0) pieces_[i] = std::string(1, char(b));
    }  // unused / undefined: nothing
  }
}

std::string TokenizerBase::piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_tokens()) throw Error("tokenizer: token id " + std::to_string(id) + " is out of range");
  if (!render_special && (attr_[id] & (kAttrControl | kAttrUnknown))) return {};
  return pieces_[id];
}

// Split the text at every occurrence of a special token's text. Tokens are
// tried longest first and each one splits all the raw pieces left by the
// previous ones, left to right (llama.cpp's order, which decides overlaps).
// User-defined tokens are matched even without `parse_special`, like
// llama.cpp and Hugging Face's added tokens.
std::vector<TokenizerBase::Fragment> TokenizerBase::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_) {
    if (!parse_special && (attr_[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& t = vocab_.tokens[id];
    if (text.find(t) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      const std::string_view scope = text.substr(0, end);
      size_t pos = f.offset;
      for (size_t m; (m = scope.find(t, pos)) != std::string_view::npos; pos = m + t.size()) {
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({id, 0, 0});
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> TokenizerBase::encode(std::string_view text, bool add_special, bool parse_special) const {
  // Symbol positions are 32-bit; no prompt comes near this.
  if (text.size() > size_t(INT32_MAX) / 4)
    throw Error("tokenizer: input of " + std::to_string(text.size()) + " bytes is too long");
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode_fragments(text, partition(text, parse_special), add_special, out);
  return out;
}

}  // namespace detail

std::unique_ptr<Tokenizer> Tokenizer::create(Vocab vocab) {
  std::unique_ptr<detail::TokenizerBase> tok;
  if (vocab.model == "gpt2") {
    tok = detail::make_bpe(std::move(vocab));
  } else if (vocab.model == "llama") {
    tok = detail::make_spm(std::move(vocab));
  } else {
    throw Error("tokenizer: unsupported tokenizer model '" + vocab.model + "' (supported: gpt2, llama)");
  }
  tok->build_piece_cache();
  static_cast<Tokenizer&>(*tok).parse_chat_template();
  return tok;
}

// Plain concatenation of the pieces: unlike llama.cpp's detokenize() this
// neither strips the SentencePiece space prefix of the first token nor
// "cleans up" spaces before punctuation, so decode(encode(s)) shows exactly
// what the model saw (for SentencePiece that is " " + s).
std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += piece(id, render_special);
  return out;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  const Vocab& v = vocab();
  if (id < 0 || id >= n_vocab()) return false;
  if (id == v.eos || id == v.eot) return true;
  return detail::is_eog_text(v.tokens[id]);
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.piece(id);
  const size_t n = unicode::complete_prefix(pending_);
  std::string ready = pending_.substr(0, n);
  pending_.erase(0, n);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace kvlab::tokenizer

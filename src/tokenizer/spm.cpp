// SentencePiece BPE ("llama" tokenizer model), as llama.cpp runs it.
//
// Per run of plain text:
//   1. prepend ' ' when add_space_prefix and the run starts the input or
//      follows a special token; replace every ' ' with U+2581 "▁";
//   2. cut into symbols of one UTF-8 character each (length from the lead
//      byte alone, no validation, so bad bytes stay bytes);
//   3. repeatedly merge the adjacent pair whose concatenation is a token with
//      the highest score (ties: leftmost), until no pair forms a token;
//   4. emit each symbol's token; a symbol that is not a token (a character
//      missing from the vocabulary) becomes byte tokens <0xXX>, one per byte.
#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/pair_merge.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace kvlab::tokenizer::detail {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

class SpmTokenizer final : public TokenizerBase {
 public:
  explicit SpmTokenizer(Vocab v) : TokenizerBase(std::move(v)) {
    // Byte fallback token of each byte: "<0xAB>", else the byte itself as a
    // token (llama.cpp's order), else UNK (llama.cpp would throw here), else
    // nothing.
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      int32_t id = find_token(name);
      if (id < 0) id = find_token(std::string(1, char(b)));
      if (id < 0) id = vocab_.unk;
      byte_token_[b] = id;
    }
  }

 protected:
  void encode_fragments(std::string_view text, const std::vector<Fragment>& fragments, bool add_special,
                        std::vector<int32_t>& out) const override {
    bool after_special = true;  // the input start counts as "after a special token"
    if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      std::string s;
      s.reserve(f.length * 3 + 3);
      if (vocab_.add_space_prefix && after_special) s += kSpace;
      for (char c : text.substr(f.offset, f.length)) {
        if (c == ' ') {
          s += kSpace;
        } else {
          s += c;
        }
      }
      encode_text(s, out);
      after_special = false;
    }
    if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  }

  std::string normal_piece(const std::string& text) const override {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }

 private:
  struct Symbol {
    uint32_t start, length;  // bytes of the text; length 0 once merged away
    int32_t prev, next;
  };
  struct Pair {
    float score;
    int32_t left, right;
    uint32_t length;  // left.length + right.length when queued
  };
  struct PairOrder {  // highest score first, then leftmost
    bool operator()(const Pair& a, const Pair& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  float score(int32_t id) const { return vocab_.scores.empty() ? 0.0f : vocab_.scores[id]; }

  void encode_text(const std::string& s, std::vector<int32_t>& out) const {
    std::vector<Symbol> sym;
    sym.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      const size_t len = std::min(unicode::seq_len(uint8_t(s[i])), s.size() - i);
      const int32_t idx = int32_t(sym.size());
      sym.push_back({uint32_t(i), uint32_t(len), idx - 1, i + len < s.size() ? idx + 1 : -1});
      i += len;
    }

    std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
    auto try_pair = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0) return;
      const uint32_t len = sym[l].length + sym[r].length;
      const int32_t id = find_token(std::string_view(s).substr(sym[l].start, len));
      if (id >= 0) queue.push({score(id), l, r, len});
    };
    merge_pairs(sym, queue, try_pair, [](Symbol&, const Pair&) {});

    for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      const Symbol& x = sym[i];
      const std::string_view piece = std::string_view(s).substr(x.start, x.length);
      if (int32_t id = find_token(piece); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {
        if (int32_t id = byte_token_[uint8_t(c)]; id >= 0) out.push_back(id);
      }
    }
  }

  std::array<int32_t, 256> byte_token_{};
};

}  // namespace

std::unique_ptr<TokenizerBase> make_spm(Vocab v) { return std::make_unique<SpmTokenizer>(std::move(v)); }

}  // namespace kvlab::tokenizer::detail

// Byte-level BPE ("gpt2" tokenizer model).
//
// Algorithm (GPT-2, as llama.cpp runs it):
//   1. decode the text to code points (bad bytes -> U+FFFD, see unicode.h);
//   2. split into words with the pre-tokenizer regexes (pretokenize.h);
//   3. re-encode each word as UTF-8 and map every byte to its GPT-2 code point;
//   4. start from one symbol per byte and repeatedly merge the adjacent pair
//      with the lowest merge rank (ties: leftmost) until no pair has a rank;
//   5. emit the token of each final symbol.
// Merges are looked up by a pair of ids, not strings: each merge side gets
// the id of its text (a token id, or a private id >= n_vocab for the rare
// merge side that is not a token) and each merge stores the id of its result.
#include <array>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/pair_merge.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace kvlab::tokenizer::detail {

namespace {

class BpeTokenizer final : public TokenizerBase {
 public:
  explicit BpeTokenizer(Vocab v) : TokenizerBase(std::move(v)), pre_(make_pretokenizer(vocab_.pre)) {
    for (int b = 0; b < 256; ++b) {
      unicode::append_utf8(byte_text_[b], unicode::byte_to_cp(uint8_t(b)));
    }
    build_merges();
    for (int b = 0; b < 256; ++b) byte_sym_[b] = lookup(byte_text_[b]);
  }

 protected:
  void encode_fragments(std::string_view text, const std::vector<Fragment>& fragments, bool add_special,
                        std::vector<int32_t>& out) const override {
    if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        encode_text(text.substr(f.offset, f.length), out);
      }
    }
    if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  }

  // Token text is in GPT-2's byte alphabet: map each code point back to its
  // byte. A code point outside the alphabet (malformed vocabulary) is kept as
  // its UTF-8 bytes.
  std::string normal_piece(const std::string& text) const override {
    std::string out;
    for (uint32_t cp : unicode::decode_lenient(text)) {
      const int b = unicode::cp_to_byte(cp);
      if (b >= 0) {
        out.push_back(char(b));
      } else {
        unicode::append_utf8(out, cp);
      }
    }
    return out;
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of left+right text, -1 when it is neither a token nor a merge side
  };
  struct Symbol {
    int32_t id;              // token id, private id (>= n_vocab) or -1
    uint32_t start, length;  // bytes of the word; length 0 once merged away
    int32_t prev, next;
  };
  struct Pair {
    int32_t rank, left, right, result;
    uint32_t length;  // left.length + right.length when queued
  };
  struct PairOrder {  // lowest rank first, then leftmost
    bool operator()(const Pair& a, const Pair& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  static uint64_t key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }

  int32_t lookup(const std::string& s) const {
    if (int32_t id = find_token(s); id >= 0) return id;
    auto it = extra_ids_.find(s);
    return it == extra_ids_.end() ? -1 : it->second;
  }

  void build_merges() {
    // "left right", split at the first space after the first byte (a side may
    // never contain a space: GPT-2 maps ' ' to U+0120). Unsplittable lines are
    // ignored, and a repeated pair keeps its first (best) rank.
    std::vector<std::pair<std::string, std::string>> sides(vocab_.merges.size());
    for (size_t i = 0; i < vocab_.merges.size(); ++i) {
      const std::string& m = vocab_.merges[i];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) continue;
      sides[i] = {m.substr(0, sp), m.substr(sp + 1)};
      for (const std::string* s : {&sides[i].first, &sides[i].second}) {
        if (!s->empty() && find_token(*s) < 0 && !extra_ids_.count(*s))
          extra_ids_.emplace(*s, n_tokens() + int32_t(extra_ids_.size()));
      }
    }
    merges_.reserve(sides.size() * 2);
    for (size_t i = 0; i < sides.size(); ++i) {
      const auto& [l, r] = sides[i];
      if (l.empty() || r.empty()) continue;
      merges_.emplace(key(lookup(l), lookup(r)), Merge{int32_t(i), lookup(l + r)});
    }
  }

  void encode_text(std::string_view text, std::vector<int32_t>& out) const {
    const std::vector<uint32_t> cps = unicode::decode_lenient(text);
    const std::vector<size_t> words = pre_.split(cps);
    std::string word;
    size_t start = 0;
    for (size_t len : words) {
      word.clear();
      for (size_t i = start; i < start + len; ++i) unicode::append_utf8(word, cps[i]);
      start += len;
      encode_word(word, out);
    }
  }

  std::string mapped(std::string_view bytes) const {
    std::string s;
    for (unsigned char c : bytes) s += byte_text_[c];
    return s;
  }

  void encode_word(const std::string& word, std::vector<int32_t>& out) const {
    if (pre_.ignore_merges) {  // llama3: a word that is a token is taken whole
      if (int32_t id = find_token(mapped(word)); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    std::vector<Symbol> sym(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      sym[i] = {byte_sym_[uint8_t(word[i])], uint32_t(i), 1, int32_t(i) - 1, i + 1 < word.size() ? int32_t(i + 1) : -1};
    }
    std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
    auto try_pair = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
      auto it = merges_.find(key(sym[l].id, sym[r].id));
      if (it != merges_.end()) queue.push({it->second.rank, l, r, it->second.result, sym[l].length + sym[r].length});
    };
    merge_pairs(sym, queue, try_pair, [](Symbol& l, const Pair& p) { l.id = p.result; });

    for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      const Symbol& s = sym[i];
      if (s.id >= 0 && s.id < n_tokens()) {
        out.push_back(s.id);
        continue;
      }
      // Not a token (a byte the vocabulary has no token for, such as 0x1D in
      // SmolLM2's, or inconsistent merges): like llama.cpp, emit the tokens of
      // the single bytes of its mapped text that exist, so such a byte is lost.
      for (char c : mapped(std::string_view(word).substr(s.start, s.length))) {
        if (int32_t id = find_token(std::string_view(&c, 1)); id >= 0) out.push_back(id);
      }
    }
  }

  PreTokenizer pre_;
  std::array<std::string, 256> byte_text_;  // GPT-2 code point of each byte, UTF-8
  std::array<int32_t, 256> byte_sym_{};     // id of byte_text_[b]
  std::unordered_map<std::string, int32_t> extra_ids_;
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace

std::unique_ptr<TokenizerBase> make_bpe(Vocab v) { return std::make_unique<BpeTokenizer>(std::move(v)); }

}  // namespace kvlab::tokenizer::detail

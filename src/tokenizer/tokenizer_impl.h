// Shared machinery of the BPE and SentencePiece tokenizers (internal to
// tokenizer/): vocabulary checks, text -> id lookup, special-token
// partitioning and token -> bytes. The model-specific part is how a run of
// plain text (a "fragment" between special tokens) becomes ids.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvlab::tokenizer::detail {

// llama.cpp's token attributes, derived from tokenizer.ggml.token_type.
enum Attr : uint16_t {
  kAttrUndefined = 0,
  kAttrNormal = 1 << 0,
  kAttrUnknown = 1 << 1,
  kAttrControl = 1 << 2,
  kAttrUserDefined = 1 << 3,
  kAttrUnused = 1 << 4,
  kAttrByte = 1 << 5,
};

// Token texts that end generation whatever the metadata says (llama.cpp
// matches them by text, and treats them as control tokens).
bool is_eog_text(std::string_view text);

class TokenizerBase : public Tokenizer {
 public:
  // Validates `v` (throws kvlab::Error) and builds the lookup tables.
  explicit TokenizerBase(Vocab v);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string piece(int32_t id, bool render_special) const override;
  const Vocab& vocab() const override { return vocab_; }

  // Fills the piece cache; called by Tokenizer::create once the derived
  // object exists (it needs the virtual normal_piece).
  void build_piece_cache();

 protected:
  // A piece of the input: a special token (token >= 0) or raw text.
  struct Fragment {
    int32_t token;
    size_t offset, length;
  };

  // Tokenize the partitioned input, adding BOS/EOS when `add_special`.
  virtual void encode_fragments(std::string_view text, const std::vector<Fragment>& fragments, bool add_special,
                                std::vector<int32_t>& out) const = 0;
  // The bytes a Normal token stands for.
  virtual std::string normal_piece(const std::string& text) const = 0;

  // Id of the token whose text is exactly `s`, or -1.
  int32_t find_token(std::string_view s) const {
    auto it = ids_.find(s);
    return it == ids_.end() ? -1 : it->second;
  }
  int32_t n_tokens() const { return int32_t(vocab_.tokens.size()); }

  Vocab vocab_;
  std::vector<uint16_t> attr_;

 private:
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  std::unordered_map<std::string_view, int32_t> ids_;  // views into vocab_.tokens
  std::vector<int32_t> special_;                       // control/user-defined/unknown, longest text first
  std::vector<std::string> pieces_;                    // piece(id, render_special = true)
};

std::unique_ptr<TokenizerBase> make_bpe(Vocab v);
std::unique_ptr<TokenizerBase> make_spm(Vocab v);

}  // namespace kvlab::tokenizer::detail

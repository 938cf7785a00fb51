// Pre-tokenizer of byte-level BPE: splits text into words before merges run,
// as the model's tokenizer.json regex does. The regexes are not interpreted;
// each supported pattern is matched by hand-written code with the same
// leftmost-alternative semantics (internal to tokenizer/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kvlab::tokenizer {

enum class SplitStep : uint8_t {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}
  //   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+      (K = max_digits)
  Llama3,
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
  //   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
  //   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // (GPT-4o, Llama 4), in the form llama.cpp runs: the letter classes
  // rewritten as "a letter but a-z" and "a letter but A-Z", without \p{M}.
  // Tekken (Mistral) is the same without the contractions and with \p{N}.
  Gpt4o,
  NumberEach,    // \p{N}         : every number code point alone
  NumberRun,     // \p{N}+
  AsciiDigits3,  // [0-9][0-9][0-9]
  PunctRun,      // [\p{P}\$\+<=>\^~\|]+
  PunctRunTick,  // [\p{P}\$\+<=>\^~\|`]+
};

struct PreTokenizer {
  std::vector<SplitStep> steps;
  int max_digits = 3;          // K of the Llama3 and Gpt4o steps (1 for Qwen2 and Tekken)
  bool cased_contractions = true;  // the Gpt4o step's words take 's, 're, ... (not Tekken's)
  bool ignore_merges = false;  // a word that is itself a token skips merging (llama3)

  // Split `cpts` into words; returns the length of each word in code points
  // (they add up to cpts.size()). Each step re-splits the previous words,
  // never merges them, like llama.cpp's sequence of regexes.
  std::vector<size_t> split(const std::vector<uint32_t>& cpts) const;
};

// The pre-tokenizer for tokenizer.ggml.pre (same names as llama.cpp; empty
// means "default"). Throws kvlab::Error for a name it does not know.
PreTokenizer make_pretokenizer(std::string_view pre);

// Whether llama.cpp adds BOS for this pre-tokenizer when the GGUF file has no
// tokenizer.ggml.add_bos_token key (gpt2 models).
bool pre_default_add_bos(std::string_view pre);

}  // namespace kvlab::tokenizer

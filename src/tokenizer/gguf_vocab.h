// Reads a tokenizer vocabulary from GGUF metadata (tokenizer.ggml.* keys).
#pragma once
#include <memory>

#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::tokenizer {

// Fills a Vocab from the tokenizer.ggml.* keys and tokenizer.chat_template.
// Absent keys get llama.cpp's defaults: for "llama" BOS 1, EOS 2, UNK 0,
// add_bos true, add_space_prefix true; for "gpt2" no special ids, add_bos
// true only for llama3-style pre-tokenizers. Special ids -1 / 4294967295 (any
// negative or >= 0xFFFFFFFF) mean "none".
// Throws kvlab::Error("<path>: ...") when tokens are missing or empty, when
// scores/types do not have one entry per token, or a special id is out of range.
Vocab vocab_from_gguf(const gguf::File& file);

// vocab_from_gguf + Tokenizer::create; errors of either name the file.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const gguf::File& file);

}  // namespace kvlab::tokenizer

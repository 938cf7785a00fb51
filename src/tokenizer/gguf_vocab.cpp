#include "tokenizer/gguf_vocab.h"

#include <cstdint>
#include <optional>

#include "common/error.h"
#include "tokenizer/pretokenize.h"

namespace kvlab::tokenizer {

namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& what) { throw Error(f.path() + ": " + what); }

// A token id key: nullopt when absent, -1 for "none", else the id (checked).
std::optional<int32_t> read_id(const gguf::File& f, const char* key, size_t n_tokens) {
  const gguf::Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&v->v)) {
    if (*i < 0) return -1;
    if (uint64_t(*i) >= 0xFFFFFFFFull) return -1;
    if (uint64_t(*i) >= n_tokens)
      fail(f, std::string("key '") + key + "' = " + std::to_string(*i) + " is out of range (" +
                  std::to_string(n_tokens) + " tokens)");
    return int32_t(*i);
  }
  if (const auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u >= 0xFFFFFFFFull) return -1;
    if (*u >= n_tokens)
      fail(f, std::string("key '") + key + "' = " + std::to_string(*u) + " is out of range (" +
                  std::to_string(n_tokens) + " tokens)");
    return int32_t(*u);
  }
  fail(f, std::string("key '") + key + "' has type " + gguf::value_type_name(v->type) + ", expected an integer");
}

}  // namespace

Vocab vocab_from_gguf(const gguf::File& f) {
  Vocab v;
  v.model = f.require_string("tokenizer.ggml.model");
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("");

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) fail(f, "missing required key 'tokenizer.ggml.tokens'");
  if (tokens->empty()) fail(f, "tokenizer.ggml.tokens is empty");
  v.tokens = std::move(*tokens);
  const size_t n = v.tokens.size();

  // Scores are f32 in practice; llama.cpp also accepts integer scores.
  if (const gguf::Value* s = f.find("tokenizer.ggml.scores")) {
    const gguf::ArrayView* a = s->as_array();
    if (a && a->elem != gguf::ValueType::F32 && a->elem != gguf::ValueType::F64) {
      const std::vector<int64_t> ints = f.get_int_array("tokenizer.ggml.scores").value();
      for (int64_t x : ints) v.scores.push_back(float(x));
    } else {
      v.scores = f.get_float_array("tokenizer.ggml.scores").value();
    }
    if (v.scores.size() != n)
      fail(f, "tokenizer.ggml.scores has " + std::to_string(v.scores.size()) + " entries for " + std::to_string(n) +
                  " tokens");
  }
  if (auto types = f.get_int_array("tokenizer.ggml.token_type")) {
    if (types->size() != n)
      fail(f, "tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries for " + std::to_string(n) +
                  " tokens");
    v.types.reserve(n);
    for (int64_t t : *types) v.types.push_back(t < INT32_MIN || t > INT32_MAX ? 0 : int32_t(t));
  }
  if (auto merges = f.get_string_array("tokenizer.ggml.merges")) v.merges = std::move(*merges);

  const bool spm = v.model == "llama";
  auto id_or = [&](const char* key, int32_t dflt) {
    // A default that does not exist in this vocabulary means "none".
    return read_id(f, key, n).value_or(dflt >= 0 && size_t(dflt) < n ? dflt : -1);
  };
  v.bos = id_or("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  v.eos = id_or("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  v.unk = id_or("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  v.eot = id_or("tokenizer.ggml.eot_token_id", -1);
  v.pad = id_or("tokenizer.ggml.padding_token_id", -1);

  const bool gpt2_bos = v.model == "gpt2" && pre_default_add_bos(v.pre);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(spm || gpt2_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  v.chat_template = f.get_string("tokenizer.chat_template").value_or("");

  if (v.add_bos && v.bos < 0) fail(f, "tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (v.add_eos && v.eos < 0) fail(f, "tokenizer.ggml.add_eos_token is true but there is no EOS token");
  return v;
}

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const gguf::File& f) {
  Vocab v = vocab_from_gguf(f);
  try {
    return Tokenizer::create(std::move(v));
  } catch (const Error& e) {
    throw Error(f.path() + ": " + e.what());
  }
}

}  // namespace kvlab::tokenizer

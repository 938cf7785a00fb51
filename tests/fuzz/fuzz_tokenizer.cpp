// libFuzzer target for the tokenizers, on the real vocabularies of the shared
// tiny model (SentencePiece-style) and, when it is in models/, the default
// model (byte-level BPE), also under the GPT-4o pre-tokenizer. Any bytes must encode without an exception, with
// every flag combination, to ids inside the vocabulary; a byte-level BPE
// tokenizer must give back the text (invalid UTF-8 read as U+FFFD, and a
// byte the vocabulary has no token for left out, as llama.cpp does); and the streaming decoder, fed any ids, must release
// exactly what a whole decode of them gives.
#include <cstddef>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using kvlab::tokenizer::Tokenizer;

// `pre`, when given, replaces the file's pre-tokenizer (one no small model
// at hand ships).
std::unique_ptr<Tokenizer> load(const std::string& path, const char* pre = nullptr) {
  if (!std::filesystem::exists(path)) return nullptr;
  kvlab::tokenizer::Vocab v = kvlab::tokenizer::vocab_from_gguf(kvlab::gguf::File::open(path));
  if (pre) v.pre = pre;
  return Tokenizer::create(std::move(v));
}

// Whether the vocabulary has a token for each byte (GPT-2's byte alphabet).
std::array<bool, 256> byte_tokens(const Tokenizer& tok) {
  namespace unicode = kvlab::tokenizer::unicode;
  std::unordered_set<std::string> texts(tok.vocab().tokens.begin(), tok.vocab().tokens.end());
  std::array<bool, 256> has{};
  for (int b = 0; b < 256; ++b) {
    std::string text;
    unicode::append_utf8(text, unicode::byte_to_cp(uint8_t(b)));
    has[size_t(b)] = texts.count(text) > 0;
  }
  return has;
}

struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  std::array<bool, 256> byte_tokens;
};

const std::vector<Loaded>& tokenizers() {
  static const std::vector<Loaded> all = [] {
    std::vector<Loaded> v;
    const std::string smollm = KVLAB_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    std::unique_ptr<Tokenizer> loaded[] = {load(KVLAB_SOURCE_DIR "/tests/models/stories260K.gguf"), load(smollm),
                                           load(smollm, "gpt-4o")};
    for (auto& t : loaded)
      if (t) {
        const std::array<bool, 256> has = byte_tokens(*t);
        v.push_back({std::move(t), has});
      }
    if (v.empty() || v.front().tok->vocab().model != "llama") std::abort();  // the shared model must be there
    return v;
  }();
  return all;
}

// A broken property: say which, for the crash report, and stop.
void check(bool ok, const char* property, const Tokenizer& tok) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_tokenizer: %s (%s vocabulary)\n", property, tok.vocab().model.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace unicode = kvlab::tokenizer::unicode;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& [tok, has_byte] : tokenizers()) {
    for (int flags = 0; flags < 4; ++flags) {
      const std::vector<int32_t> ids = tok->encode(text, flags & 1, flags & 2);
      for (int32_t id : ids) check(id >= 0 && id < tok->n_vocab(), "an id outside the vocabulary", *tok);
    }
    if (tok->vocab().model == "gpt2") {
      std::string utf8, expected;
      for (uint32_t cp : unicode::decode_lenient(text)) unicode::append_utf8(utf8, cp);
      for (char c : utf8)
        if (has_byte[uint8_t(c)]) expected += c;
      check(tok->decode(tok->encode(text, false, false)) == expected, "decode(encode(text)) differs from the text",
            *tok);
    }
    // The input read as token ids, two bytes each.
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < size; i += 2) ids.push_back(int32_t((data[i] | data[i + 1] << 8) % tok->n_vocab()));
    kvlab::tokenizer::StreamDecoder stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    check(streamed == tok->decode(ids), "the stream differs from a whole decode", *tok);
  }
  return 0;
}

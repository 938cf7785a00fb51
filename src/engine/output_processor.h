// What a client sees of a sequence's tokens, for the CLI and the server
// alike: the text (detokenised across token boundaries, so a code point
// split over two tokens comes out whole), cut at the first stop string,
// with the tail that could still become a stop string held back until it
// cannot, and each token's logprob entry given its bytes and its text offset
// in characters (OpenAI's text_offset).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::engine {

class OutputProcessor {
 public:
  OutputProcessor(const tokenizer::Tokenizer& tok, std::vector<std::string> stop, bool with_logprobs);

  // A prompt token echoed at the head of the text: never searched for stop
  // strings (they end the completion only).
  void append_prompt(int32_t id, TokenLogprobs lp = {});
  // A generated token. True when the text now holds a stop string: the text
  // is cut where it starts, and the sequence is done.
  bool append(int32_t id, TokenLogprobs lp = {});
  // The decoder's held-back bytes, at the end of generation.
  void flush();

  struct Delta {
    std::string text;
    std::vector<TokenLogprobs> logprobs;  // the tokens whose text starts in `text`
    bool empty() const { return text.empty() && logprobs.empty(); }
  };
  // What may go out now: all of the text when `final`, else all but what
  // could still turn into a stop string (never splitting a UTF-8 code point).
  Delta release(bool final);
  const std::string& text() const { return text_; }

 private:
  void add_token(int32_t id, TokenLogprobs lp);
  // How much of the text is safe to send.
  size_t releasable(bool final) const;

  const tokenizer::Tokenizer& tok_;
  tokenizer::StreamDecoder decoder_;
  std::vector<std::string> stop_;
  size_t stop_hold_ = 0;  // the longest stop string less one byte
  bool with_logprobs_;
  std::string text_;
  size_t emitted_ = 0;  // bytes of text_ released
  // Every token's entry (text_offset in bytes until released), the first not
  // yet released, the bytes of all pieces so far, and how many characters
  // text_ has up to counted_bytes_.
  std::vector<TokenLogprobs> logprobs_;
  size_t logprobs_sent_ = 0, piece_bytes_ = 0, counted_bytes_ = 0, counted_chars_ = 0;
};

}  // namespace kvlab::engine

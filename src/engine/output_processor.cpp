#include "engine/output_processor.h"

#include <algorithm>

namespace kvlab::engine {
namespace {
bool continuation_byte(char c) { return (uint8_t(c) & 0xC0) == 0x80; }
}  // namespace

OutputProcessor::OutputProcessor(const tokenizer::Tokenizer& tok, std::vector<std::string> stop, bool with_logprobs)
    : tok_(tok), decoder_(tok), stop_(std::move(stop)), with_logprobs_(with_logprobs) {
  for (const std::string& s : stop_) stop_hold_ = std::max(stop_hold_, s.size() - 1);
}

void OutputProcessor::add_token(int32_t id, TokenLogprobs lp) {
  if (with_logprobs_) {
    // The decoder releases the pieces' bytes in order, so this token's text
    // starts at the bytes of all pieces before it.
    lp.id = id;
    lp.bytes = tok_.piece(id);
    lp.text_offset = piece_bytes_;
    piece_bytes_ += lp.bytes.size();
    logprobs_.push_back(std::move(lp));
  }
  text_ += decoder_.push(id);
}

void OutputProcessor::append_prompt(int32_t id, TokenLogprobs lp) { add_token(id, std::move(lp)); }

bool OutputProcessor::append(int32_t id, TokenLogprobs lp) {
  add_token(id, std::move(lp));
  for (const std::string& stop : stop_) {
    const size_t p = text_.find(stop, emitted_);
    if (p != std::string::npos) {
      text_.resize(p);
      return true;
    }
  }
  return false;
}

void OutputProcessor::flush() { text_ += decoder_.flush(); }

size_t OutputProcessor::releasable(bool final) const {
  if (final || stop_.empty()) return text_.size();
  size_t safe = text_.size() > stop_hold_ ? text_.size() - stop_hold_ : 0;
  while (safe > emitted_ && safe < text_.size() && continuation_byte(text_[safe])) --safe;
  return safe;
}

OutputProcessor::Delta OutputProcessor::release(bool final) {
  const size_t safe = releasable(final);
  Delta d;
  // The tokens whose text starts in what goes out now (a token cut off by a
  // stop string, at or past the text's end, never does), their offsets
  // turned into characters.
  while (logprobs_sent_ < logprobs_.size() && logprobs_[logprobs_sent_].text_offset < std::max(safe, emitted_)) {
    TokenLogprobs& e = logprobs_[logprobs_sent_++];
    for (; counted_bytes_ < e.text_offset; ++counted_bytes_) counted_chars_ += !continuation_byte(text_[counted_bytes_]);
    e.text_offset = counted_chars_;
    d.logprobs.push_back(std::move(e));
  }
  if (safe > emitted_) d.text = text_.substr(emitted_, safe - emitted_);
  emitted_ = std::max(safe, emitted_);
  return d;
}

}  // namespace kvlab::engine

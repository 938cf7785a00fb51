// JSON mode (OpenAI's response_format {"type": "json_object"}): which bytes
// may come next so that the text so far stays the start of one JSON object
// (RFC 8259: objects, arrays, strings with their escapes and valid UTF-8,
// numbers, true / false / null; whitespace between tokens), strictly enough
// for strict parsers: a \u escape of a UTF-16 surrogate must be a high one
// followed at once by an escaped low one.
//
// JsonPrefix is a pushdown automaton over bytes whose whole state is a small
// value, so trying a token is copying it and feeding the token's bytes. Two
// limits keep a model from generating forever inside the grammar: at most
// kMaxWhitespace whitespace bytes in a row (a model in JSON mode can emit
// blank lines without end, as OpenAI's documentation warns) and nesting at
// most kMaxDepth deep.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvlab::sample {

class JsonPrefix {
 public:
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxWhitespace = 24;  // a newline and 23 columns of indentation

  // Takes one byte; false (the state unchanged) when no JSON object starts
  // with the text so far followed by it.
  bool feed(uint8_t c);
  bool feed(std::string_view bytes);  // every byte, stopping at the first refused
  // The top-level object is closed: nothing more may follow.
  bool complete() const { return mode_ == Mode::Done; }
  // Inside a string with no escape or UTF-8 sequence under way: any byte of
  // 0x20..0x7e other than '"' and '\\' is taken and leaves the state as it is.
  bool in_plain_string() const { return mode_ == Mode::String && !esc_ && hex_ == 0 && utf8_left_ == 0 && !want_low_; }

 private:
  enum class Mode : uint8_t {
    Start,        // before the top-level object: whitespace or '{'
    KeyOrClose,   // after '{': a key or '}'
    Key,          // after ',' in an object: a key
    Colon,        // after a key
    Value,        // after ':' or ',' in an array
    ValueOrClose, // after '[': a value or ']'
    CommaOrClose, // after a value in a container
    String,       // inside a string (key_ says which kind)
    Number,       // inside a number (num_ says where)
    Literal,      // inside true, false or null
    Done,
  };
  bool open(uint8_t kind);    // '{' or '[' as a value
  bool close(uint8_t kind);   // '}' or ']' closing the innermost container
  void value_done();          // a value ended: what its container expects next
  bool start_value(uint8_t c);
  bool after_value(uint8_t c);  // ',' or a closing bracket after a value
  bool whitespace(uint8_t c);
  bool string_byte(uint8_t c);
  bool number_byte(uint8_t c);

  Mode mode_ = Mode::Start;
  uint8_t depth_ = 0;
  uint8_t ws_ = 0;          // whitespace bytes in a row
  bool key_ = false;        // the string being read is an object key
  bool esc_ = false;        // after a '\' in a string
  uint8_t hex_ = 0;         // hex digits of a \u escape still due
  uint16_t code_ = 0;       // the \u escape's code unit so far
  bool want_low_ = false;   // a high surrogate was escaped: "\u" and a low one must follow
  uint8_t utf8_left_ = 0;   // continuation bytes still due
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xbf;  // the range of the next continuation byte
  uint8_t num_ = 0;         // number sub-state (json_prefix.cpp)
  uint8_t lit_ = 0, lit_at_ = 0;  // which literal, and how many of its bytes were seen
  uint32_t stack_ = 0;      // bit i: container i is an array (else an object)
};

}  // namespace kvlab::sample

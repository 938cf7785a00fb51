#include "sample/json_prefix.h"

namespace kvlab::sample {
namespace {

bool is_whitespace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

// Number sub-states (RFC 8259 section 6: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?).
enum NumberAt : uint8_t {
  kAfterMinus,     // a digit must follow
  kAfterZero,      // a leading 0: no more integer digits
  kIntDigits,
  kAfterPoint,     // a digit must follow
  kFracDigits,
  kAfterE,         // a sign or a digit
  kAfterExpSign,   // a digit must follow
  kExpDigits,
};
bool number_may_end(uint8_t at) { return at == kAfterZero || at == kIntDigits || at == kFracDigits || at == kExpDigits; }

}  // namespace

bool JsonPrefix::feed(uint8_t c) {
  // On a copy, so a refused byte leaves the state as it was whatever the
  // step had changed before refusing.
  JsonPrefix next = *this;
  const bool ws = is_whitespace(c);
  bool ok = false;
  switch (next.mode_) {
    case Mode::Start: ok = ws ? next.whitespace(c) : c == '{' && next.open('{'); break;
    case Mode::Done: ok = false; break;
    case Mode::KeyOrClose:
    case Mode::Key:
      if (ws) ok = next.whitespace(c);
      else if (c == '"') next.mode_ = Mode::String, next.key_ = true, ok = true;
      else ok = c == '}' && next.mode_ == Mode::KeyOrClose && next.close('}');
      break;
    case Mode::Colon:
      ok = ws ? next.whitespace(c) : c == ':';
      if (ok && !ws) next.mode_ = Mode::Value;
      break;
    case Mode::Value: ok = ws ? next.whitespace(c) : next.start_value(c); break;
    case Mode::ValueOrClose:
      ok = ws ? next.whitespace(c) : c == ']' ? next.close(']') : next.start_value(c);
      break;
    case Mode::CommaOrClose: ok = ws ? next.whitespace(c) : next.after_value(c); break;
    case Mode::String: ok = next.string_byte(c); break;
    case Mode::Number: ok = next.number_byte(c); break;
    case Mode::Literal: {
      const std::string_view lit = kLiterals[next.lit_];
      ok = c == uint8_t(lit[next.lit_at_]);
      if (ok && ++next.lit_at_ == lit.size()) next.value_done();
      break;
    }
  }
  if (!ok) return false;
  if (!ws) next.ws_ = 0;
  *this = next;
  return true;
}

bool JsonPrefix::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(uint8_t(c))) return false;
  return true;
}

bool JsonPrefix::whitespace(uint8_t) {
  if (ws_ >= kMaxWhitespace) return false;
  ++ws_;
  return true;
}

bool JsonPrefix::open(uint8_t kind) {
  if (depth_ >= kMaxDepth) return false;
  const uint32_t bit = uint32_t(1) << depth_;
  stack_ = kind == '[' ? stack_ | bit : stack_ & ~bit;
  ++depth_;
  mode_ = kind == '{' ? Mode::KeyOrClose : Mode::ValueOrClose;
  return true;
}

bool JsonPrefix::close(uint8_t kind) {
  if (depth_ == 0) return false;
  const bool array = (stack_ >> (depth_ - 1)) & 1;
  if (array != (kind == ']')) return false;
  --depth_;
  value_done();
  return true;
}

void JsonPrefix::value_done() { mode_ = depth_ == 0 ? Mode::Done : Mode::CommaOrClose; }

bool JsonPrefix::start_value(uint8_t c) {
  switch (c) {
    case '{':
    case '[': return open(c);
    case '"': mode_ = Mode::String, key_ = false; return true;
    case '-': mode_ = Mode::Number, num_ = kAfterMinus; return true;
    case '0': mode_ = Mode::Number, num_ = kAfterZero; return true;
    case 't': mode_ = Mode::Literal, lit_ = 0, lit_at_ = 1; return true;
    case 'f': mode_ = Mode::Literal, lit_ = 1, lit_at_ = 1; return true;
    case 'n': mode_ = Mode::Literal, lit_ = 2, lit_at_ = 1; return true;
    default:
      if (c < '1' || c > '9') return false;
      mode_ = Mode::Number, num_ = kIntDigits;
      return true;
  }
}

bool JsonPrefix::after_value(uint8_t c) {
  if (c == '}' || c == ']') return close(c);
  if (c != ',') return false;
  mode_ = (stack_ >> (depth_ - 1)) & 1 ? Mode::Value : Mode::Key;
  return true;
}

bool JsonPrefix::string_byte(uint8_t c) {
  if (utf8_left_ > 0) {
    if (c < utf8_lo_ || c > utf8_hi_) return false;
    --utf8_left_;
    utf8_lo_ = 0x80, utf8_hi_ = 0xbf;
    return true;
  }
  if (hex_ > 0) {
    if (!is_hex(c)) return false;
    const int v = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
    code_ = uint16_t(code_ << 4 | v);
    if (--hex_ > 0) return true;
    // The code unit is complete (RFC 8259 section 7: characters outside
    // the BMP as a pair of escaped UTF-16 surrogates).
    const bool high = code_ >= 0xd800 && code_ <= 0xdbff, low = code_ >= 0xdc00 && code_ <= 0xdfff;
    if (want_low_) return low && (want_low_ = false, true);
    if (low) return false;
    want_low_ = high;
    return true;
  }
  if (esc_) {
    esc_ = false;
    if (c == 'u') return hex_ = 4, code_ = 0, true;
    return !want_low_ && (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't');
  }
  if (want_low_ && c != '\\') return false;
  if (c == '"') {
    if (key_) mode_ = Mode::Colon;
    else value_done();
    return true;
  }
  if (c == '\\') return esc_ = true, true;
  if (c < 0x20) return false;  // control characters must be escaped
  if (c < 0x80) return true;
  // A UTF-8 lead byte (RFC 3629 section 4): how many continuation bytes
  // follow, and the narrower range of the first where overlong forms,
  // surrogates or code points past U+10FFFF would begin.
  if (c >= 0xc2 && c <= 0xdf) return utf8_left_ = 1, true;
  if (c >= 0xe0 && c <= 0xef) {
    utf8_left_ = 2;
    if (c == 0xe0) utf8_lo_ = 0xa0;
    if (c == 0xed) utf8_hi_ = 0x9f;
    return true;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    utf8_left_ = 3;
    if (c == 0xf0) utf8_lo_ = 0x90;
    if (c == 0xf4) utf8_hi_ = 0x8f;
    return true;
  }
  return false;
}

bool JsonPrefix::number_byte(uint8_t c) {
  const bool digit = is_digit(c);
  switch (num_) {
    case kAfterMinus:
      if (!digit) return false;
      num_ = c == '0' ? kAfterZero : kIntDigits;
      return true;
    case kIntDigits:
      if (digit) return true;
      [[fallthrough]];
    case kAfterZero:
      if (c == '.') return num_ = kAfterPoint, true;
      if (c == 'e' || c == 'E') return num_ = kAfterE, true;
      break;
    case kAfterPoint:
      return digit && (num_ = kFracDigits, true);
    case kFracDigits:
      if (digit) return true;
      if (c == 'e' || c == 'E') return num_ = kAfterE, true;
      break;
    case kAfterE:
      if (c == '+' || c == '-') return num_ = kAfterExpSign, true;
      [[fallthrough]];
    case kAfterExpSign:
      return digit && (num_ = kExpDigits, true);
    case kExpDigits:
      if (digit) return true;
      break;
  }
  // The number ends here; the byte is whatever may follow a value. (A
  // number is never the top-level value, so a container is open.)
  if (!number_may_end(num_)) return false;
  value_done();
  return is_whitespace(c) ? whitespace(c) : after_value(c);
}

}  // namespace kvlab::sample

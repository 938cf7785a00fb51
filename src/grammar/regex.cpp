#include "grammar/regex.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace kvlab::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// What a raw character inside a JSON string may not be (RFC 8259 section 7).
const Ranges kNeedsEscape = {{0x00, 0x1f}, {'"', '"'}, {'\\', '\\'}};
const std::string kAnyChar = "[^\"\\\\\\x00-\\x1f]";

std::string code_point_escape(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, cp > 0xffff ? "\\U%08X" : "\\u%04X", unsigned(cp));
  return buf;
}

// The ranges less the characters that need an escape.
Ranges without_escaped(const Ranges& in) {
  Ranges out;
  for (auto [lo, hi] : in) {
    for (const auto& [a, b] : kNeedsEscape) {
      if (b < lo || a > hi) continue;
      if (a > lo) out.emplace_back(lo, a - 1);
      lo = b + 1;
    }
    if (lo <= hi) out.emplace_back(lo, hi);
  }
  return out;
}

std::string class_text(const Ranges& ranges, bool negated) {
  Ranges r = negated ? ranges : without_escaped(ranges);
  if (negated) r.insert(r.end(), kNeedsEscape.begin(), kNeedsEscape.end());
  if (r.empty()) throw Error("pattern: a character class that matches nothing");
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : r) {
    out += code_point_escape(lo);
    if (lo == hi) continue;
    out += '-';
    out += code_point_escape(hi);
  }
  return out + "]";
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  std::string parse() {
    const bool start_anchor = peek() == '^';
    if (start_anchor) ++pos_;
    std::string body = alternation();
    if (!at_end()) fail("unbalanced ')'");
    const bool end_anchor = ended_with_dollar_;
    return (start_anchor ? "" : kAnyChar + "* ") + "(" + body + ")" + (end_anchor ? "" : " " + kAnyChar + "*");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("pattern: " + what + " at offset " + std::to_string(pos_) + " of '" + std::string(p_) + "'");
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return at_end() ? '\0' : p_[pos_]; }

  std::string alternation() {
    std::string out = sequence();
    while (peek() == '|') {
      ++pos_;
      out += " | " + sequence();
    }
    return out;
  }

  std::string sequence() {
    std::string out = "\"\"";
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == p_.size()) {
        ++pos_;
        ended_with_dollar_ = true;
        break;
      }
      std::string item = atom();
      out += ' ';
      out += quantified(std::move(item));
    }
    return out;
  }

  std::string quantified(std::string item) {
    const char c = peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) fail("unterminated {m,n}");
      q = std::string(p_.substr(pos_, close - pos_ + 1));
      pos_ = close + 1;
    } else {
      return item;
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings
    return "(" + item + ")" + q;
  }

  std::string atom() {
    const char c = p_[pos_++];
    switch (c) {
      case '(': {
        if (++nesting_ > kMaxNesting) fail("groups nested too deeply");
        if (p_.substr(pos_, 2) == "?:") pos_ += 2;
        else if (peek() == '?') fail("look-around and named groups are not supported");
        std::string inner = alternation();
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        --nesting_;
        return "(" + inner + ")";
      }
      case '[': return bracket();
      case '.': return kAnyChar;
      case '\\': return escape();
      case '*': case '+': case '?': case '{': fail(std::string("nothing to repeat before '") + c + "'");
      case '^': case '$': fail("anchors are supported only at the ends");
      default: --pos_; return literal(next_code_point());
    }
  }

  // A character as the JSON string spells it.
  std::string literal(uint32_t cp) const {
    if (cp == '"') return gbnf_literal("\\\"");
    if (cp == '\\') return gbnf_literal("\\\\");
    if (cp < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
      return gbnf_literal(buf);
    }
    std::string out = "[";
    out += code_point_escape(cp);
    return out + "]";
  }

  uint32_t next_code_point() {
    const uint8_t c = uint8_t(p_[pos_]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > p_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (uint8_t(p_[pos_ + size_t(i)]) & 0x3f);
    pos_ += size_t(len);
    return cp;
  }

  // \d \w \s and complements as ranges; false for another escape.
  static bool shorthand(char c, Ranges& r, bool& negated) {
    negated = c >= 'A' && c <= 'Z';
    switch (c | 0x20) {
      case 'd': r = {{'0', '9'}}; return true;
      case 'w': r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; return true;
      case 's': r = {{' ', ' '}}; return true;  // the other blanks need escapes in JSON
      default: return false;
    }
  }

  uint32_t escaped_char(char c) {
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'b': case 'B': fail("word boundaries are not supported");
      default:
        if (c >= '1' && c <= '9') fail("back-references are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(std::string("unsupported escape '\\") + c + "'");
        return uint8_t(c);
    }
  }

  std::string escape() {
    if (at_end()) fail("a trailing '\\'");
    const char c = p_[pos_++];
    Ranges r;
    bool negated = false;
    if (shorthand(c, r, negated)) return class_text(r, negated);
    return literal(escaped_char(c));
  }

  std::string bracket() {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges r;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        if (at_end()) fail("a trailing '\\'");
        Ranges sh;
        bool sh_negated = false;
        if (shorthand(p_[pos_], sh, sh_negated)) {
          if (sh_negated) fail("\\D, \\W and \\S inside a class are not supported");
          ++pos_;
          r.insert(r.end(), sh.begin(), sh.end());
          continue;
        }
        lo = escaped_char(p_[pos_++]);
      } else {
        lo = next_code_point();
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        hi = peek() == '\\' ? (++pos_, escaped_char(p_[pos_++])) : next_code_point();
        if (hi < lo) fail("a reversed range");
      }
      r.emplace_back(lo, hi);
    }
    ++pos_;
    return class_text(r, negated);
  }

  std::string_view p_;
  size_t pos_ = 0;
  bool ended_with_dollar_ = false;
  int nesting_ = 0;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern) { return RegexParser(pattern).parse(); }

}  // namespace kvlab::grammar

#include "jinja/lexer.h"

#include <cstdint>

#include "common/utf8.h"
#include "jinja/error.h"

namespace kvlab::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// jinja2 turns every line ending into "\n" and drops one final newline
// (keep_trailing_newline is off) before it lexes.
std::string normalized(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] != '\r')
      out += src[i];
    else if (i + 1 >= src.size() || src[i + 1] != '\n')
      out += '\n';
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body decoded as jinja2 does, with Python's
// "unicode-escape" codec: \n \t \\ \' \" \xHH \uHHHH \UHHHHHHHH, octal, and a
// backslash-newline that joins lines; other escapes stay as written.
std::string decode_escapes(std::string_view s, int line) {
  static const std::string_view simple_from = "\\'\"abfnrtv\n", simple_to = "\\'\"\a\b\f\n\r\t\v";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    if (const size_t k = simple_from.find(e); k != std::string_view::npos) {
      if (e != '\n') out += simple_to[k];
    } else if (e >= '0' && e <= '7') {
      uint32_t cp = 0;
      for (int n = 0; n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7'; ++n, ++i) cp = cp * 8 + uint32_t(s[i] - '0');
      --i;
      utf8::append_utf8(out, cp);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int n = 0; n < digits; ++n) {
        const int h = i + 1 + n < s.size() ? hex_value(s[i + 1 + n]) : -1;
        if (h < 0) fail_at(line, "truncated \\" + std::string(1, e) + " escape in a string");
        cp = cp * 16 + uint32_t(h);
      }
      if (cp > 0x10FFFF) fail_at(line, "illegal Unicode character in a string");
      i += size_t(digits);
      utf8::append_utf8(out, cp);
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(normalized(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = next_tag();
      const char kind = tag < src_.size() ? src_[tag + 1] : 0;
      emit_text(tag, kind);
      if (tag >= src_.size()) break;
      pos_ = tag + 2;
      if (kind == '#')
        skip_comment();
      else
        lex_tag(kind);
    }
    tokens_.push_back({TokenKind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag() const {
    for (size_t at = src_.find('{', pos_); at != std::string::npos; at = src_.find('{', at + 1))
      if (at + 1 < src_.size() && (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#')) return at;
    return src_.size();
  }

  // The text up to the tag at `tag`, less the whitespace the tag's left
  // side strips (see lexer.h).
  void emit_text(size_t tag, char kind) {
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    const char sign = tag + 2 < src_.size() ? src_[tag + 2] : 0;
    if (tag < src_.size() && sign == '-') {
      while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    } else if (tag < src_.size() && sign != '+' && kind != '{') {
      const size_t line_start = text.rfind('\n') + 1;  // 0 when there is none
      if (line_start > 0 || line_starting_) {
        size_t keep = text.size();
        while (keep > line_start && is_space(text[keep - 1])) --keep;
        if (keep == line_start) text = text.substr(0, line_start);
      }
    }
    if (!text.empty()) tokens_.push_back({TokenKind::Text, std::string(text), line_});
    count_lines(pos_, tag);
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  // After a closing delimiter: "-" strips all the whitespace that follows,
  // else trim_blocks drops one newline after a block or comment tag.
  void close_tag(bool strip, bool keep_newline, bool is_block) {
    const size_t from = pos_;
    if (strip) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (is_block && !keep_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    count_lines(from, pos_);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void skip_comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail_at(start_line, "unterminated comment");
    const bool strip = end > pos_ && src_[end - 1] == '-';
    const bool keep = end > pos_ && src_[end - 1] == '+';
    count_lines(pos_, end + 2);
    pos_ = end + 2;
    close_tag(strip, keep, true);
  }

  void lex_tag(char kind) {
    const bool block = kind == '%';
    tokens_.push_back({block ? TokenKind::BlockOpen : TokenKind::OutputOpen, "", line_});
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    const std::string_view close = block ? "%}" : "}}";
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail_at(line_, std::string("unterminated '") + (block ? "{%" : "{{") + "' tag");
      const char sign = src_[pos_];
      if ((sign == '-' || sign == '+') && src_.compare(pos_ + 1, 2, close) == 0) {
        pos_ += 3;
        return finish_tag(block, sign == '-', sign == '+');
      }
      if (src_.compare(pos_, 2, close) == 0) {
        pos_ += 2;
        return finish_tag(block, false, false);
      }
      lex_expression_token();
    }
  }

  void finish_tag(bool block, bool strip, bool keep_newline) {
    tokens_.push_back({block ? TokenKind::BlockClose : TokenKind::OutputClose, "", line_});
    close_tag(strip, keep_newline, block);
  }

  void lex_expression_token() {
    const char c = src_[pos_];
    const size_t start = pos_;
    if (is_name_start(c)) {
      while (pos_ < src_.size() && (is_name_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
      tokens_.push_back({TokenKind::Name, src_.substr(start, pos_ - start), line_});
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      static const char* const kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                               ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
      for (const char* op : kOperators) {
        if (src_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
          pos_ += std::char_traits<char>::length(op);
          tokens_.push_back({TokenKind::Operator, op, line_});
          return;
        }
      }
      fail_at(line_, std::string("unexpected character '") + c + "'");
    }
  }

  void lex_number() {
    const size_t start = pos_;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      for (++pos_; pos_ < src_.size() && is_digit(src_[pos_]);) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        for (pos_ = p; pos_ < src_.size() && is_digit(src_[pos_]);) ++pos_;
      }
    }
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, src_.substr(start, pos_ - start), line_});
  }

  void lex_string(char quote) {
    const int start_line = line_;
    size_t end = pos_ + 1;
    while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
    if (end >= src_.size()) fail_at(start_line, "unterminated string");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, end - pos_ - 1);
    tokens_.push_back({TokenKind::String, decode_escapes(body, start_line), start_line});
    count_lines(pos_, end);
    pos_ = end + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the last tag's closing ended a line (lstrip_blocks)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace kvlab::jinja

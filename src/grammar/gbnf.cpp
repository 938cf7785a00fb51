#include "grammar/gbnf.h"

#include <map>

#include "common/error.h"

namespace kvlab::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  RuleSet parse(std::string_view root) {
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (const auto& [name, where] : first_use_)
      if (!defined_[name]) fail_at(where, "unknown rule '" + name + "'");
    auto it = rule_index_.find(std::string(root));
    if (it == rule_index_.end() || !defined_[std::string(root)])
      throw Error("grammar: no rule named '" + std::string(root) + "'");
    set_.root = it->second;
    return std::move(set_);
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(text_[i]) & 0xc0) != 0x80) {
        ++column;
      }
    }
    throw Error("grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Blanks and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  // At a line break inside a rule: the rule goes on when the next line
  // starts with '|'.
  bool continues_on_next_line() {
    const size_t saved = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = saved;
    return false;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t index_of(const std::string& name) {
    auto [it, inserted] = rule_index_.try_emplace(name, uint32_t(set_.rules.size()));
    if (inserted) set_.rules.push_back({name, {}});
    if (set_.rules.size() > kMaxRules) fail("the grammar has more than " + std::to_string(kMaxRules) + " rules");
    return it->second;
  }

  void count_symbols(size_t n) {
    symbols_ += n;
    if (symbols_ > kMaxSymbols) fail("the grammar has more than " + std::to_string(kMaxSymbols) + " symbols");
  }

  uint32_t new_rule(const std::string& base) {
    return index_of(base + "#" + std::to_string(set_.rules.size()));  // '#' is in no name the text can define
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    if (defined_[name]) fail_at(start, "rule '" + name + "' is defined twice");
    defined_[name] = true;
    const uint32_t r = index_of(name);
    set_.rules[r].alternatives = parse_alternatives(name, false);
    if (!at_end() && peek() != '\n') fail(std::string("unexpected '") + peek() + "'");
  }

  std::vector<std::vector<Symbol>> parse_alternatives(const std::string& rule, bool nested) {
    std::vector<std::vector<Symbol>> alts;
    alts.push_back(parse_sequence(rule, nested));
    while (peek() == '|' || (!nested && peek() == '\n' && continues_on_next_line())) {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  std::vector<Symbol> parse_sequence(const std::string& rule, bool nested) {
    std::vector<Symbol> seq;
    for (;;) {
      skip_space(nested);
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n') return seq;
      const size_t item_start = seq.size();
      parse_item(rule, seq);
      skip_space(nested);
      parse_repetition(rule, seq, item_start);
    }
  }

  // One element: appends its symbols to `seq` (a literal gives several).
  void parse_item(const std::string& rule, std::vector<Symbol>& seq) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') fail("unterminated string literal");
        const uint32_t cp = parse_char();
        seq.push_back(char_symbol({{{cp, cp}}, false}));
      }
      ++pos_;
    } else if (c == '[') {
      seq.push_back(char_symbol(parse_class()));
    } else if (c == '.') {
      ++pos_;
      seq.push_back(char_symbol({{}, true}));
    } else if (c == '(') {
      if (++nesting_ > kMaxNesting) fail("groups nested more than " + std::to_string(kMaxNesting) + " deep");
      ++pos_;
      skip_space(true);
      const uint32_t group = new_rule(rule);
      set_.rules[group].alternatives = parse_alternatives(rule, true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      --nesting_;
      seq.push_back({Symbol::Kind::Rule, group});
    } else if (is_name_char(c)) {
      const size_t at = pos_;
      const std::string name = parse_name();
      first_use_.try_emplace(name, at);
      seq.push_back({Symbol::Kind::Rule, index_of(name)});
    } else {
      fail(std::string("unexpected '") + c + "'");
    }
  }

  Symbol char_symbol(CharClass cls) {
    count_symbols(1);
    set_.classes.push_back(std::move(cls));
    return {Symbol::Kind::Char, uint32_t(set_.classes.size() - 1)};
  }

  CharClass parse_class() {
    ++pos_;  // '['
    CharClass cls;
    if (peek() == '^') {
      cls.negated = true;
      ++pos_;
    }
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        if (at_end() || peek() == '\n') fail("unterminated character class");
        hi = parse_char();
        if (hi < lo) fail("character range is reversed");
      }
      cls.ranges.emplace_back(lo, hi);
    }
    ++pos_;
    return cls;
  }

  // One character of a literal or class: an escape or one UTF-8 sequence.
  uint32_t parse_char() {
    const uint8_t c = uint8_t(text_[pos_]);
    if (c == '\\') return parse_escape();
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > text_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int i = 1; i < len; ++i) {
      const uint8_t k = uint8_t(text_[pos_ + size_t(i)]);
      if ((k & 0xc0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (k & 0x3f);
    }
    pos_ += size_t(len);
    return cp;
  }

  uint32_t parse_escape() {
    ++pos_;  // '\'
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '^': return uint8_t(c);
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      default: --pos_; fail(std::string("unknown escape '\\") + c + "'");
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = hex_value(peek());
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10ffff) fail("code point past U+10FFFF");
    return v;
  }

  int parse_count() {
    const size_t start = pos_;
    long n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > kMaxRepetition) fail("repetition count above " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return int(n);
  }

  // `*`, `+`, `?` or `{m,n}` after the item whose symbols start at
  // seq[item]: the item becomes one symbol repeated (a group if it was a
  // literal of several characters).
  void parse_repetition(const std::string& rule, std::vector<Symbol>& seq, size_t item) {
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') return;
    const auto [min, max] = repetition_bounds();
    if (seq.size() == item) return;  // an empty literal repeated is still empty
    if (seq.size() - item > 1) {
      const uint32_t group = new_rule(rule);
      set_.rules[group].alternatives.push_back(std::vector<Symbol>(seq.begin() + ptrdiff_t(item), seq.end()));
      seq.resize(item);
      seq.push_back({Symbol::Kind::Rule, group});
    }
    const Symbol x = seq.back();
    seq.pop_back();
    count_symbols(size_t(min) + 2 * size_t(max < 0 ? 1 : max - min));
    for (int i = 0; i < min; ++i) seq.push_back(x);
    if (max < 0) {  // x*: star ::= x star | ""
      const uint32_t star = new_rule(rule);
      set_.rules[star].alternatives = {{x, {Symbol::Kind::Rule, star}}, {}};
      seq.push_back({Symbol::Kind::Rule, star});
      return;
    }
    // max - min optional copies, nested: (x (x ...)?)?
    uint32_t inner = 0;
    for (int i = 0; i < max - min; ++i) {
      const uint32_t opt = new_rule(rule);
      set_.rules[opt].alternatives = {i == 0 ? std::vector<Symbol>{x} : std::vector<Symbol>{x, {Symbol::Kind::Rule, inner}}, {}};
      inner = opt;
    }
    if (max > min) seq.push_back({Symbol::Kind::Rule, inner});
  }

  // max -1: unbounded.
  std::pair<int, int> repetition_bounds() {
    const char c = text_[pos_++];
    if (c == '*') return {0, -1};
    if (c == '+') return {1, -1};
    if (c == '?') return {0, 1};
    skip_space(false);
    const int min = peek() == ',' ? 0 : parse_count();  // {,n}: up to n
    skip_space(false);
    int max = min;
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = peek() == '}' ? -1 : parse_count();
      skip_space(false);
    }
    if (peek() != '}') fail("expected '}'");
    ++pos_;
    if (max >= 0 && max < min) fail("repetition {m,n} needs m <= n");
    return {min, max};
  }

  std::string_view text_;
  size_t pos_ = 0;
  RuleSet set_;
  std::map<std::string, uint32_t> rule_index_;
  std::map<std::string, bool> defined_;
  std::map<std::string, size_t> first_use_;  // where each name was first referenced
  int nesting_ = 0;
  size_t symbols_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) {
  return Grammar::compile(Parser(text).parse(root));
}

}  // namespace kvlab::grammar

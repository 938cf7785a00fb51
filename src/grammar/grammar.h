// A context-free grammar over Unicode code points, in the form the matcher
// runs (grammar/matcher.h): every rule is a list of alternatives, each a
// sequence of character classes and rule references. Repetition and
// grouping are already rewritten into helper rules by the GBNF parser
// (grammar/gbnf.h), as llama.cpp's grammar format defines them.
//
// compile() checks what the matcher relies on and flattens the rules:
//  - no left recursion (a rule that reaches itself before taking a
//    character would expand forever);
//  - the root derives at least one finite string; alternatives that derive
//    none are dropped, so every state the matcher reaches can still end.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvlab::grammar {

// A set of code points: the union of inclusive ranges, or its complement.
struct CharClass {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool negated = false;

  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (a UTF-8 sequence under way
  // can still end in one of them).
  bool intersects(uint32_t lo, uint32_t hi) const;
  bool empty() const;  // matches no code point at all
};

// One item of an alternative: a character class (arg indexes
// Grammar::classes), a rule (arg indexes Grammar::rules), or the end of the
// alternative.
struct Symbol {
  enum class Kind : uint8_t { Char, Rule, End };
  Kind kind;
  uint32_t arg;
};

// Rules as the parser builds them: alternatives are symbol sequences
// without End markers.
struct RuleSet {
  struct Rule {
    std::string name;
    std::vector<std::vector<Symbol>> alternatives;
  };
  std::vector<Rule> rules;
  std::vector<CharClass> classes;
  uint32_t root = 0;
};

struct Grammar {
  // Every alternative of every rule, each ended by an End symbol; a matcher
  // position is an index into it.
  std::vector<Symbol> program;
  std::vector<CharClass> classes;
  std::vector<std::vector<uint32_t>> rules;  // rule r's alternatives: where each starts in `program`
  std::vector<std::string> names;
  uint32_t root = 0;

  // Throws kvlab::Error naming the rule for left recursion, or when the
  // root derives no finite string.
  static Grammar compile(RuleSet set);
};

}  // namespace kvlab::grammar

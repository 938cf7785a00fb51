#include "grammar/grammar.h"

#include <algorithm>

#include "common/error.h"

namespace kvlab::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10ffff;

// Fixed point of "a rule has the property if one of its alternatives has
// every symbol with it"; `char_has` says whether a character class has it.
template <typename CharHas>
std::vector<bool> rules_where_some_alternative(const RuleSet& set, CharHas char_has) {
  std::vector<bool> has(set.rules.size(), false);
  auto symbol_has = [&](const Symbol& s) { return s.kind == Symbol::Kind::Char ? char_has(s.arg) : bool(has[s.arg]); };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < set.rules.size(); ++r) {
      if (has[r]) continue;
      for (const auto& alt : set.rules[r].alternatives)
        if (std::all_of(alt.begin(), alt.end(), symbol_has)) {
          has[r] = changed = true;
          break;
        }
    }
  }
  return has;
}

// Rule r may start with rule s: s appears in an alternative of r after
// symbols that can all match the empty string. A cycle in that relation is
// left recursion (direct or through other rules).
class LeftRecursion {
 public:
  explicit LeftRecursion(const RuleSet& set)
      : set_(set), nullable_(rules_where_some_alternative(set, [](uint32_t) { return false; })), state_(set.rules.size()) {}

  void check() {
    for (uint32_t r = 0; r < set_.rules.size(); ++r) visit(r);
  }

 private:
  enum class Visit : uint8_t { New, Open, Done };

  void visit(uint32_t r) {
    if (state_[r] == Visit::Done) return;
    if (state_[r] == Visit::Open)
      throw Error("grammar: rule '" + set_.rules[r].name + "' is left-recursive (it can reach itself before taking a character)");
    state_[r] = Visit::Open;
    for (const auto& alt : set_.rules[r].alternatives)
      for (const Symbol& s : alt) {
        if (s.kind != Symbol::Kind::Rule) break;
        visit(s.arg);
        if (!nullable_[s.arg]) break;
      }
    state_[r] = Visit::Done;
  }

  const RuleSet& set_;
  std::vector<bool> nullable_;
  std::vector<Visit> state_;
};

}  // namespace

bool CharClass::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
  return in != negated;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  // Some code point of [lo, hi] is outside every range: walk up from lo,
  // jumping past each range that covers the candidate.
  uint32_t candidate = lo;
  for (bool moved = true; moved && candidate <= hi;) {
    moved = false;
    for (const auto& [a, b] : ranges)
      if (candidate >= a && candidate <= b) {
        if (b >= hi) return false;
        candidate = b + 1;
        moved = true;
      }
  }
  return candidate <= hi;
}

bool CharClass::empty() const { return !intersects(0, kMaxCodePoint); }

Grammar Grammar::compile(RuleSet set) {
  LeftRecursion(set).check();
  const std::vector<bool> productive =
      rules_where_some_alternative(set, [&](uint32_t c) { return !set.classes[c].empty(); });
  if (!productive[set.root])
    throw Error("grammar: rule '" + set.rules[set.root].name + "' matches no string (every alternative needs an impossible part)");
  Grammar g;
  g.root = set.root;
  g.classes = std::move(set.classes);
  for (RuleSet::Rule& rule : set.rules) {
    std::vector<uint32_t> starts;
    for (const auto& alt : rule.alternatives) {
      const bool dead = std::any_of(alt.begin(), alt.end(), [&](const Symbol& s) {
        return s.kind == Symbol::Kind::Char ? g.classes[s.arg].empty() : !productive[s.arg];
      });
      if (dead) continue;  // would strand the matcher in a state no string can finish
      starts.push_back(uint32_t(g.program.size()));
      g.program.insert(g.program.end(), alt.begin(), alt.end());
      g.program.push_back({Symbol::Kind::End, 0});
    }
    g.rules.push_back(std::move(starts));
    g.names.push_back(std::move(rule.name));
  }
  return g;
}

}  // namespace kvlab::grammar

// Runs a grammar over bytes: which texts are prefixes of a string the
// grammar matches. Character classes are over code points, so bytes are
// decoded as UTF-8 on the way (strictly: no overlong forms, surrogates or
// code points past U+10FFFF), and a byte in the middle of a sequence is
// taken while some class at a stack top can still hold the character.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/stacks.h"

namespace kvlab::grammar {

class Matcher {
 public:
  // Copies share the grammar and copy the parse state.
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Takes the bytes if the text so far followed by them is still a prefix
  // of the language; otherwise returns false and the state is unchanged.
  bool accept(std::string_view bytes);
  // The text so far is a whole string of the language.
  bool can_end() const;
  // ... and no byte may follow it.
  bool complete() const;

  const Grammar& grammar() const { return *grammar_; }
  const StackArena& arena() const { return arena_; }
  std::span<const uint32_t> stacks() const { return stacks_; }
  const Utf8Partial& utf8() const { return utf8_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  StackArena arena_;
  std::vector<uint32_t> stacks_;
  Utf8Partial utf8_;
};

}  // namespace kvlab::grammar

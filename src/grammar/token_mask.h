// Which tokens of a vocabulary a grammar allows next, computed by walking
// the vocabulary's token bytes as a prefix tree (trie) once per step from
// the matcher's state: a byte shared by many tokens is checked once, and a
// byte the grammar refuses prunes every token below it. Where the parse
// loops on a state (inside a string, a run of digits), a subtree whose
// bytes all keep that state alive is taken whole without walking it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/matcher.h"

namespace kvlab::grammar {

class TokenMask {
 public:
  // pieces[id]: token id's bytes; tokens without bytes (control tokens, end
  // of generation) are never allowed here: the caller decides about them.
  explicit TokenMask(const std::vector<std::string>& pieces);

  // Sets allowed[id] to 1 for every token whose bytes `m` accepts next, and
  // to 0 for the others (allowed is resized to the vocabulary); returns how
  // many are allowed.
  int allowed(const Matcher& m, std::vector<uint8_t>& allowed) const;
  std::string_view bytes(int32_t id) const;
  size_t vocab_size() const { return offsets_.size() - 1; }
  size_t nodes() const { return nodes_.size(); }

 private:
  // Trie nodes in depth-first order: a node's subtree is the nodes after it
  // up to `end`, and its tokens are order_[tokens_begin, tokens_end), those
  // ending at the node itself first (up to `own_end`).
  struct Node {
    uint32_t end;
    uint32_t tokens_begin, own_end, tokens_end;
    uint8_t byte;         // the byte on the edge into the node
    bool ascii_below;     // every byte below the node is ASCII
    uint64_t below[2];    // which ASCII bytes occur below the node
  };
  class Walk;

  uint32_t build(const std::vector<int32_t>& sorted, size_t lo, size_t hi, size_t depth, uint8_t byte);

  std::vector<uint32_t> offsets_;  // token i's bytes: bytes_[offsets_[i] .. offsets_[i + 1])
  std::string bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> order_;  // token ids in trie order
  size_t longest_ = 0;          // bytes in the longest token: the walk's deepest level
};

}  // namespace kvlab::grammar

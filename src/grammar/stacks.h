// The matcher's parse state, as llama.cpp's grammar sampler keeps it: a set
// of pushdown stacks, one per way the text so far can be parsed. A stack's
// top points at the character class that comes next; the frames below it
// point at where each enclosing rule goes on once the inner one is done.
//
// Stacks are persistent: a frame is (program position, frame below), kept in
// an arena, so advancing a stack adds one frame on top of a shared tail and
// trying a byte and undoing it is truncating the arena back to a mark. The
// token mask (grammar/token_mask.h) walks the vocabulary's trie that way.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace kvlab::grammar {

// The empty stack: the root rule has matched in full.
inline constexpr uint32_t kAccepted = UINT32_MAX;
// At most this many parses are followed at once; a grammar ambiguous
// enough to need more keeps the first ones (the limit bounds memory and
// time per byte, as every other per-request resource is bounded).
inline constexpr size_t kMaxStacks = 128;

// A UTF-8 sequence under way: its code point bits so far and how many
// continuation bytes are still due.
struct Utf8Partial {
  uint32_t bits = 0;
  uint8_t left = 0;
  uint8_t length = 0;
};

class StackArena {
 public:
  struct Frame {
    uint32_t pos;     // into Grammar::program
    uint32_t parent;  // the frame below, or kAccepted
  };

  explicit StackArena(const Grammar& g) : g_(&g) {}

  // The stacks before any byte: the root's alternatives, expanded.
  void start(std::vector<uint32_t>& out);
  // The stacks after `byte`, given the stacks before it and the UTF-8
  // sequence under way (updated). Returns false for a byte that cannot
  // continue valid UTF-8; `out` may then be left partly filled.
  bool advance(std::span<const uint32_t> in, Utf8Partial& utf8, uint8_t byte, std::vector<uint32_t>& out);

  bool same(uint32_t a, uint32_t b) const;  // the two stacks hold the same frames
  uint32_t size() const { return uint32_t(frames_.size()); }
  void truncate(uint32_t mark) { frames_.resize(mark); }
  const Frame& frame(uint32_t i) const { return frames_[i]; }
  // Copies the frames `stacks` use into a fresh arena, renumbering them.
  void compact(std::vector<uint32_t>& stacks);

 private:
  uint32_t push(uint32_t pos, uint32_t parent);
  void add(std::vector<uint32_t>& out, uint32_t stack) const;
  // Adds `stack` (top at a character class or rule) with its rule expanded
  // until every resulting top is a character class.
  void expand(uint32_t stack, std::vector<uint32_t>& out);
  // The stack that goes on at `pos` above `parent`: pops when pos ends an
  // alternative, so tail positions do not grow the stack.
  uint32_t continuation(uint32_t pos, uint32_t parent);
  void take_code_point(std::span<const uint32_t> in, uint32_t cp, std::vector<uint32_t>& out);
  // A sequence under way: keeps the stacks whose class holds some code point
  // the sequence can still end as (the range [lo, hi]).
  void keep_possible(std::span<const uint32_t> in, uint32_t lo, uint32_t hi, std::vector<uint32_t>& out) const;

  const Grammar* g_;
  std::vector<Frame> frames_;
};

}  // namespace kvlab::grammar

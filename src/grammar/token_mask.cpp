#include "grammar/token_mask.h"

#include <algorithm>

namespace kvlab::grammar {

// One step's walk: a scratch copy of the matcher's arena that each trie
// edge extends and truncates back, and one stack buffer per depth.
class TokenMask::Walk {
 public:
  Walk(const TokenMask& trie, const Matcher& m, std::vector<uint8_t>& allowed)
      : trie_(trie), arena_(m.arena()), allowed_(allowed), levels_(trie.longest_ + 1) {}

  int run(const Matcher& m) {
    visit(0, m.stacks(), m.utf8(), 0);
    return count_;
  }

 private:
  struct LoopBytes {
    std::vector<uint32_t> positions;  // the stack, top first
    uint64_t bits[2] = {0, 0};
  };

  void visit(uint32_t node, std::span<const uint32_t> stacks, Utf8Partial utf8, size_t depth) {
    std::vector<uint32_t>& next = levels_[depth];
    for (uint32_t c = node + 1; c < trie_.nodes_[node].end; c = trie_.nodes_[c].end) {
      const Node& child = trie_.nodes_[c];
      const uint32_t mark = arena_.size();
      Utf8Partial after = utf8;
      if (arena_.advance(stacks, after, child.byte, next) && !next.empty()) {
        const bool has_children = child.end > c + 1;
        if (has_children && after.left == 0 && child.ascii_below && loops_over_subtree(child, stacks, next)) {
          allow(child.tokens_begin, child.tokens_end);
        } else {
          allow(child.tokens_begin, child.own_end);
          if (has_children) visit(c, next, after, depth + 1);
        }
      }
      arena_.truncate(mark);
    }
  }

  // Some stack came back to itself on the edge's byte, and every byte
  // below the child brings it back again: each token below keeps that
  // parse alive to its last byte.
  bool loops_over_subtree(const Node& child, std::span<const uint32_t> before, std::span<const uint32_t> after) {
    for (uint32_t s : after) {
      if (s == kAccepted) continue;
      const bool looped = std::any_of(before.begin(), before.end(), [&](uint32_t b) { return arena_.same(b, s); });
      if (!looped) continue;
      const LoopBytes& loop = loop_bytes(s);
      if ((child.below[0] & ~loop.bits[0]) == 0 && (child.below[1] & ~loop.bits[1]) == 0) return true;
    }
    return false;
  }

  // The ASCII bytes after which `stack` is among its own successors,
  // cached by the stack's content: the loop's frames are made anew at each
  // trie node.
  const LoopBytes& loop_bytes(uint32_t stack) {
    for (const LoopBytes& l : loops_)
      if (holds(stack, l.positions)) return l;
    LoopBytes l;
    for (uint32_t f = stack; f != kAccepted; f = arena_.frame(f).parent) l.positions.push_back(arena_.frame(f).pos);
    const uint32_t one[1] = {stack};
    for (uint32_t b = 0; b < 128; ++b) {
      const uint32_t mark = arena_.size();
      Utf8Partial utf8;
      arena_.advance(one, utf8, uint8_t(b), scratch_);
      if (std::any_of(scratch_.begin(), scratch_.end(), [&](uint32_t s) { return arena_.same(s, stack); }))
        l.bits[b / 64] |= uint64_t(1) << (b % 64);
      arena_.truncate(mark);
    }
    loops_.push_back(std::move(l));
    return loops_.back();
  }

  // The stack's frames, top first, are at these program positions.
  bool holds(uint32_t stack, const std::vector<uint32_t>& positions) const {
    size_t i = 0;
    for (uint32_t f = stack; f != kAccepted; f = arena_.frame(f).parent, ++i)
      if (i == positions.size() || arena_.frame(f).pos != positions[i]) return false;
    return i == positions.size();
  }

  void allow(uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) allowed_[size_t(trie_.order_[i])] = 1;
    count_ += int(end - begin);
  }

  const TokenMask& trie_;
  StackArena arena_;
  std::vector<uint8_t>& allowed_;
  std::vector<std::vector<uint32_t>> levels_;
  std::vector<uint32_t> scratch_;
  std::vector<LoopBytes> loops_;
  int count_ = 0;
};

TokenMask::TokenMask(const std::vector<std::string>& pieces) {
  offsets_.push_back(0);
  std::vector<int32_t> sorted;
  for (size_t id = 0; id < pieces.size(); ++id) {
    bytes_ += pieces[id];
    offsets_.push_back(uint32_t(bytes_.size()));
    longest_ = std::max(longest_, pieces[id].size());
    if (!pieces[id].empty()) sorted.push_back(int32_t(id));
  }
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  build(sorted, 0, sorted.size(), 0, 0);
}

std::string_view TokenMask::bytes(int32_t id) const {
  return std::string_view(bytes_).substr(offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
}

// The node for the tokens sorted[lo, hi), which share their first `depth`
// bytes; returns its index.
uint32_t TokenMask::build(const std::vector<int32_t>& sorted, size_t lo, size_t hi, size_t depth, uint8_t byte) {
  const uint32_t index = uint32_t(nodes_.size());
  nodes_.push_back({});
  Node n{};
  n.byte = byte;
  n.ascii_below = true;
  n.tokens_begin = uint32_t(order_.size());
  size_t i = lo;
  for (; i < hi && bytes(sorted[i]).size() == depth; ++i) order_.push_back(sorted[i]);
  n.own_end = uint32_t(order_.size());
  while (i < hi) {
    const uint8_t b = uint8_t(bytes(sorted[i])[depth]);
    size_t j = i;
    while (j < hi && uint8_t(bytes(sorted[j])[depth]) == b) ++j;
    const Node& child = nodes_[build(sorted, i, j, depth + 1, b)];
    if (b >= 0x80 || !child.ascii_below) {
      n.ascii_below = false;
    } else {
      n.below[b / 64] |= uint64_t(1) << (b % 64);
      n.below[0] |= child.below[0];
      n.below[1] |= child.below[1];
    }
    i = j;
  }
  n.end = uint32_t(nodes_.size());
  n.tokens_end = uint32_t(order_.size());
  nodes_[index] = n;
  return index;
}

int TokenMask::allowed(const Matcher& m, std::vector<uint8_t>& allowed) const {
  allowed.assign(vocab_size(), 0);
  return Walk(*this, m, allowed).run(m);
}

}  // namespace kvlab::grammar

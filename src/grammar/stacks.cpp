#include "grammar/stacks.h"

#include <algorithm>

namespace kvlab::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10ffff;
constexpr uint32_t kSurrogateFirst = 0xd800, kSurrogateLast = 0xdfff;

// The smallest code point a UTF-8 sequence of this length may encode
// (shorter forms are overlong, RFC 3629 section 3).
uint32_t min_code_point(uint8_t length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

// The length of the sequence a lead byte starts, 0 for a byte that starts
// none (a continuation byte, 0xc0/0xc1 that only start overlong forms,
// 0xf5.. past U+10FFFF).
uint8_t sequence_length(uint8_t lead) {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

}  // namespace

uint32_t StackArena::push(uint32_t pos, uint32_t parent) {
  frames_.push_back({pos, parent});
  return uint32_t(frames_.size() - 1);
}

uint32_t StackArena::continuation(uint32_t pos, uint32_t parent) {
  return g_->program[pos].kind == Symbol::Kind::End ? parent : push(pos, parent);
}

bool StackArena::same(uint32_t a, uint32_t b) const {
  while (a != b) {
    if (a == kAccepted || b == kAccepted || frames_[a].pos != frames_[b].pos) return false;
    a = frames_[a].parent;
    b = frames_[b].parent;
  }
  return true;
}

void StackArena::add(std::vector<uint32_t>& out, uint32_t stack) const {
  if (out.size() >= kMaxStacks) return;
  for (uint32_t s : out)
    if (same(s, stack)) return;
  out.push_back(stack);
}

void StackArena::expand(uint32_t stack, std::vector<uint32_t>& out) {
  if (stack == kAccepted) return add(out, kAccepted);
  const Frame f = frames_[stack];
  const Symbol& sym = g_->program[f.pos];
  if (sym.kind == Symbol::Kind::Char) return add(out, stack);
  const uint32_t after = continuation(f.pos + 1, f.parent);
  for (uint32_t alt : g_->rules[sym.arg]) {
    if (g_->program[alt].kind == Symbol::Kind::End) {
      expand(after, out);  // an empty alternative: the rule is done at once
    } else if (g_->program[alt].kind == Symbol::Kind::Char) {
      add(out, push(alt, after));
    } else {
      expand(push(alt, after), out);
    }
  }
}

void StackArena::start(std::vector<uint32_t>& out) {
  out.clear();
  for (uint32_t alt : g_->rules[g_->root]) expand(continuation(alt, kAccepted), out);
}

void StackArena::take_code_point(std::span<const uint32_t> in, uint32_t cp, std::vector<uint32_t>& out) {
  for (uint32_t s : in) {
    if (s == kAccepted) continue;
    const Frame f = frames_[s];
    if (g_->classes[g_->program[f.pos].arg].matches(cp)) expand(continuation(f.pos + 1, f.parent), out);
  }
}

void StackArena::keep_possible(std::span<const uint32_t> in, uint32_t lo, uint32_t hi, std::vector<uint32_t>& out) const {
  for (uint32_t s : in) {
    if (s == kAccepted) continue;
    const CharClass& cls = g_->classes[g_->program[frames_[s].pos].arg];
    // Surrogates are not characters: the sequence cannot end as one.
    const bool below = lo < kSurrogateFirst && cls.intersects(lo, std::min(hi, kSurrogateFirst - 1));
    const bool above = hi > kSurrogateLast && cls.intersects(std::max(lo, kSurrogateLast + 1), hi);
    if (below || above) out.push_back(s);
  }
}

bool StackArena::advance(std::span<const uint32_t> in, Utf8Partial& utf8, uint8_t byte, std::vector<uint32_t>& out) {
  out.clear();
  if (utf8.left == 0) {
    if (byte < 0x80) {
      take_code_point(in, byte, out);
      return true;
    }
    utf8.length = sequence_length(byte);
    if (utf8.length == 0) return false;
    utf8.left = uint8_t(utf8.length - 1);
    utf8.bits = byte & (0x7fu >> utf8.length);
  } else {
    if ((byte & 0xc0) != 0x80) return false;
    utf8.bits = (utf8.bits << 6) | (byte & 0x3fu);
    --utf8.left;
  }
  const unsigned shift = 6u * utf8.left;
  const uint32_t lo = std::max(utf8.bits << shift, min_code_point(utf8.length));
  const uint32_t hi = std::min((utf8.bits << shift) | ((1u << shift) - 1), kMaxCodePoint);
  const bool all_surrogates = lo >= kSurrogateFirst && hi <= kSurrogateLast;
  if (lo > hi || all_surrogates) return false;  // overlong, past U+10FFFF, or a surrogate
  if (utf8.left > 0) {
    keep_possible(in, lo, hi, out);
  } else {
    take_code_point(in, utf8.bits, out);
    utf8 = {};
  }
  return true;
}

void StackArena::compact(std::vector<uint32_t>& stacks) {
  std::vector<Frame> fresh;
  std::vector<uint32_t> renumbered(frames_.size(), kAccepted);
  std::vector<uint32_t> chain;
  for (uint32_t& s : stacks) {
    chain.clear();
    for (uint32_t f = s; f != kAccepted && renumbered[f] == kAccepted; f = frames_[f].parent) chain.push_back(f);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Frame& old = frames_[*it];
      fresh.push_back({old.pos, old.parent == kAccepted ? kAccepted : renumbered[old.parent]});
      renumbered[*it] = uint32_t(fresh.size() - 1);
    }
    if (s != kAccepted) s = renumbered[s];
  }
  frames_ = std::move(fresh);
}

}  // namespace kvlab::grammar

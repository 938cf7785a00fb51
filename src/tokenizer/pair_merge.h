// The merge loop that byte-level BPE (bpe.cpp) and SentencePiece (spm.cpp)
// share: a word's symbols as a doubly linked list, and a priority queue of
// adjacent pairs that could join. The best pair is joined, and the new
// symbol's pairs with its neighbours are offered in turn, until no queued
// pair is left. What "best" means (merge rank or piece score) and which
// pairs exist are the caller's: Order ranks the queue, `offer` queues a
// pair if it can join.
#pragma once
#include <cstdint>
#include <queue>
#include <vector>

namespace kvlab::tokenizer {

// Symbol: {length, prev, next} (length 0 once merged away); Pair: {left,
// right, length} with length = the two symbols' lengths when queued.
// joined(l, p) runs as pair p joins its right symbol into l, before l grows.
template <class Symbol, class Pair, class Order, class Offer, class Joined>
void merge_pairs(std::vector<Symbol>& sym, std::priority_queue<Pair, std::vector<Pair>, Order>& queue, Offer&& offer,
                 Joined&& joined) {
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) offer(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(p.left)];
    Symbol& r = sym[size_t(p.right)];
    // Stale entry: one side was merged since (lengths only ever grow).
    if (l.length == 0 || r.length == 0 || l.length + r.length != p.length) continue;
    joined(l, p);
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    offer(l.prev, p.left);
    offer(p.left, l.next);
  }
}

}  // namespace kvlab::tokenizer

// Splitting one job's units of work (rows of a matrix, chunks of positions)
// over the pool's threads when the work streams from DRAM.
//
// Each thread owns one contiguous range of units, so its reads are one
// sequential stream the prefetchers can follow (units handed out one at a
// time interleave the threads' streams and leave each core a fraction of the
// bandwidth: default model, 2 threads, tg128 ~120 -> ~180 tok/s). A thread
// works through its own range front to back, a third of what is left at a
// time (few claims, small ones near the end); one that finishes early takes
// half of what is left of the fullest other range, from its back. So a core
// that was descheduled or slowed (a shared VM) does not hold up the job while
// the other waits at the barrier.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/error.h"

namespace kvlab::kernels {

class RangeSplit {
 public:
  // Before the job: `units` split into `ranges` (the pool's size) ranges.
  // Claims take at least `min_take` units (the rest of a range if fewer).
  void reset(size_t units, size_t ranges, size_t min_take) {
    if (units > UINT32_MAX) throw Error("a job of more than 2^32 units cannot be split");
    if (capacity_ < ranges) {
      spans_ = std::make_unique<Span[]>(ranges);
      capacity_ = ranges;
    }
    n_ = ranges;
    min_take_ = std::max<size_t>(1, min_take);
    for (size_t i = 0; i < ranges; ++i)
      spans_[i].v.store(uint64_t(units * i / ranges) << 32 | (units * (i + 1) / ranges), std::memory_order_relaxed);
  }

  // The body of task `own` (< ranges): calls run(a, b) for unit ranges
  // [a, b) until no unit is left anywhere. Every unit runs exactly once.
  template <class Run>
  void work(size_t own, Run&& run) {
    size_t a, b;
    while (claim(spans_[own].v, false, 3, a, b)) run(a, b);
    for (;;) {
      size_t victim = n_, most = 0;
      for (size_t i = 0; i < n_; ++i) {
        const uint64_t s = spans_[i].v.load(std::memory_order_relaxed);
        const size_t front = size_t(s >> 32), back = size_t(uint32_t(s));
        if (back > front && back - front > most) most = back - front, victim = i;
      }
      if (victim == n_) return;
      if (claim(spans_[victim].v, true, 2, a, b)) run(a, b);
    }
  }

 private:
  // A range is one 64-bit word, front << 32 | back, claimed by CAS; one
  // cache line each, so claiming from one's own range does not contend.
  struct alignas(64) Span {
    std::atomic<uint64_t> v{0};
  };

  bool claim(std::atomic<uint64_t>& span, bool from_back, size_t divisor, size_t& a, size_t& b) const {
    uint64_t s = span.load(std::memory_order_relaxed);
    for (;;) {
      const size_t front = size_t(s >> 32), back = size_t(uint32_t(s));
      if (front >= back) return false;
      const size_t take = std::min(std::max(min_take_, (back - front) / divisor), back - front);
      const uint64_t next = from_back ? (uint64_t(front) << 32 | (back - take)) : (uint64_t(front + take) << 32 | back);
      if (span.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
        a = from_back ? back - take : front;
        b = from_back ? back : front + take;
        return true;
      }
    }
  }

  std::unique_ptr<Span[]> spans_;
  size_t capacity_ = 0, n_ = 0, min_take_ = 1;
};

}  // namespace kvlab::kernels

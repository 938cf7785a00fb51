// std::vector whose storage starts on a 64-byte boundary (a cache line, one
// AVX-512 register). The prefill matmuls store each token's sums in runs of 8
// floats (32 bytes) at offsets that are multiples of 32 bytes from the start
// of the output (kernels/rows8.h): from a 16-byte aligned start, where
// malloc puts large blocks, every other store straddles two cache lines.
// That makes the 960x576 and 3072x576 q4_1 matmuls of 512 tokens about 15%
// slower than into an aligned buffer (bench/micro_matmul.cpp sweeps the
// output offset).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace kvlab {

template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlign); }

  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

}  // namespace kvlab

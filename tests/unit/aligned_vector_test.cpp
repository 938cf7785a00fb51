#include "common/aligned_vector.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace kvlab {
namespace {

bool on_cache_line(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// Sizes below and above malloc's threshold for a block of its own (128 KiB
// by default), where plain vectors start 16 bytes past a page boundary.
TEST(AlignedVector, StorageStartsOnACacheLine) {
  for (size_t n : {1, 3, 16, 1000, 40000, 1 << 20}) {
    AlignedVector<float> v(n, 1.0f);
    EXPECT_TRUE(on_cache_line(v.data())) << n;
    v.resize(2 * n + 5);  // regrown storage is aligned too, and keeps the values
    EXPECT_TRUE(on_cache_line(v.data())) << n;
    EXPECT_EQ(v[n - 1], 1.0f);
  }
}

}  // namespace
}  // namespace kvlab

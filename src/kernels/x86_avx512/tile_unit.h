// The AMX tile unit as the tile kernels use it (rows16_amx_avx512.cpp), in
// two implementations with one interface:
//   AmxTiles       runs the instructions (Intel SDM vol. 1, ch. 18: eight
//                  tile registers of up to 16 rows x 64 bytes, shaped by a
//                  64-byte configuration that LDTILECFG loads);
//   EmulatedTiles  a scalar model of the same instructions' results, so the
//                  kernels' packing and operation order run and are tested
//                  on CPUs without AMX (kernels::emulate_tiles).
// Register numbers are template arguments because the instructions encode
// them. Tile state is per thread, in both.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace kvlab::kernels::avx512 {

struct TileShape {
  uint8_t rows = 0;
  uint16_t row_bytes = 0;  // "colsb"
};
using TileShapes = std::array<TileShape, 8>;

// LDTILECFG's operand: palette 1, then each register's bytes per row
// (16-bit, from byte 16) and rows (8-bit, from byte 48); unused registers 0.
struct alignas(64) TileConfig {
  uint8_t bytes[64] = {};
  explicit TileConfig(const TileShapes& shapes) {
    bytes[0] = 1;
    for (size_t r = 0; r < shapes.size(); ++r) {
      std::memcpy(bytes + 16 + 2 * r, &shapes[r].row_bytes, 2);
      bytes[48 + r] = shapes[r].rows;
    }
  }
};

// The instructions, written out because GCC's intrinsics for tile loads and
// LDTILECFG do not tell the compiler they read memory (the weight tile is
// written just before it is loaded). "%c" prints the register number bare.
struct AmxTiles {
  static void configure(const TileShapes& shapes) {
    const TileConfig config(shapes);
    asm volatile("ldtilecfg %0" ::"m"(config) : "memory");
  }
  static void release() { asm volatile("tilerelease" ::: "memory"); }
  template <int R>
  static void load(const void* base, size_t stride) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(R) : "memory");
  }
  template <int R>
  static void store(void* base, size_t stride) {
    asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(R) : "memory");
  }
  template <int R>
  static void zero() {
    asm volatile("tilezero %%tmm%c0" ::"i"(R));
  }
  // C += A (signed bytes) . B (unsigned bytes), int32 sums of each 4 products.
  template <int C, int A, int B>
  static void dpbsud() {
    asm volatile("tdpbsud %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(B), "i"(A), "i"(C));
  }
};

// The instructions' results on plain arrays. A misuse the hardware would
// fault on (an unconfigured unit, shapes that do not chain) throws.
class EmulatedTiles {
 public:
  static void configure(const TileShapes& shapes) {
    State& s = state();
    s.shapes = shapes;
    s.configured = true;
    for (auto& t : s.data) std::memset(t, 0, sizeof t);
  }
  static void release() { state().configured = false; }
  template <int R>
  static void load(const void* base, size_t stride) {
    auto [shape, data] = reg(R);
    std::memset(data, 0, 16 * 64);
    for (size_t r = 0; r < shape.rows; ++r)
      std::memcpy(data + 64 * r, static_cast<const uint8_t*>(base) + r * stride, shape.row_bytes);
  }
  template <int R>
  static void store(void* base, size_t stride) {
    auto [shape, data] = reg(R);
    for (size_t r = 0; r < shape.rows; ++r)
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, data + 64 * r, shape.row_bytes);
  }
  template <int R>
  static void zero() {
    std::memset(reg(R).data, 0, 16 * 64);
  }
  // C[m][n] += sum over k < K of int8(A[m][k]) * uint8(B[k / 4][4n + k % 4]),
  // M = C's rows, N = C's row bytes / 4, K = A's row bytes.
  template <int C, int A, int B>
  static void dpbsud() {
    auto [cs, c] = reg(C);
    auto [as, a] = reg(A);
    auto [bs, b] = reg(B);
    if (as.rows != cs.rows || bs.row_bytes != cs.row_bytes || 4 * bs.rows != as.row_bytes || cs.row_bytes % 4)
      throw std::logic_error("tdpbsud: tile shapes do not chain");
    const size_t n_cols = cs.row_bytes / 4u, depth = as.row_bytes;
    uint8_t column[16][64];  // B by column (column n, element k), so each sum reads two contiguous runs
    for (size_t k = 0; k < depth; ++k)
      for (size_t n = 0; n < n_cols; ++n) column[n][k] = b[64 * (k / 4) + 4 * n + k % 4];
    for (size_t m = 0; m < cs.rows; ++m)
      for (size_t n = 0; n < n_cols; ++n) {
        int32_t sum;
        std::memcpy(&sum, c + 64 * m + 4 * n, 4);
        for (size_t k = 0; k < depth; ++k) sum += int32_t(int8_t(a[64 * m + k])) * int32_t(column[n][k]);
        std::memcpy(c + 64 * m + 4 * n, &sum, 4);
      }
  }

 private:
  struct State {
    bool configured = false;
    TileShapes shapes{};
    uint8_t data[8][16 * 64] = {};
  };
  struct Reg {
    const TileShape& shape;
    uint8_t* data;
  };
  static State& state() {
    thread_local State s;
    return s;
  }
  static Reg reg(int r) {
    State& s = state();
    if (!s.configured) throw std::logic_error("tile instruction before ldtilecfg");
    return {s.shapes[size_t(r)], s.data[r]};
  }
};

}  // namespace kvlab::kernels::avx512

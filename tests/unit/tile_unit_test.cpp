// The AMX tile unit as the kernels use it (kernels/x86_avx512/tile_unit.h):
// the scalar model against TDPBSUD's definition, the hardware against the
// model where the CPU has a usable unit, and the rule that selects the Amx
// kernel set. The tile kernels themselves are checked bit for bit against
// the scalar reference in kernels_test.cpp (Rows8.*), on the hardware or on
// the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/isa.h"
#include "kernels/cpu.h"
#include "kernels/x86_avx512/tile_unit.h"

namespace kvlab {
namespace {

using kernels::Isa;
using kernels::avx512::AmxTiles;
using kernels::avx512::EmulatedTiles;
using kernels::avx512::TileShapes;

// An M x N product of depth K: C (register 0) += A (register 4, M rows of K
// signed bytes) . B (register 6, the K x N unsigned matrix packed 4 rows of
// it per tile row: B[k / 4][4n + k % 4] = w[n][k]).
struct Product {
  size_t m, n, k;
  std::vector<int8_t> a;     // m x k
  std::vector<uint8_t> w;    // n x k
  std::vector<int32_t> c0;   // m x n
  alignas(64) uint8_t a_tile[16 * 64] = {}, b_tile[16 * 64] = {}, c_tile[16 * 64] = {};

  Product(size_t m_, size_t n_, size_t k_, uint32_t seed) : m(m_), n(n_), k(k_), a(m * k), w(n * k), c0(m * n) {
    uint32_t s = seed;
    auto next = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
    for (auto& x : a) x = int8_t(next());
    for (auto& x : w) x = uint8_t(next());
    for (auto& x : c0) x = int32_t(next()) - (1 << 23);
    for (size_t r = 0; r < m; ++r) std::memcpy(a_tile + 64 * r, &a[r * k], k);
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < k; ++i) b_tile[64 * (i / 4) + 4 * j + i % 4] = w[j * k + i];
    for (size_t r = 0; r < m; ++r) std::memcpy(c_tile + 64 * r, &c0[r * n], 4 * n);
  }
  TileShapes shapes() const {
    TileShapes s{};
    s[0] = {uint8_t(m), uint16_t(4 * n)};
    s[4] = {uint8_t(m), uint16_t(k)};
    s[6] = {uint8_t(k / 4), uint16_t(4 * n)};
    return s;
  }
  int32_t want(size_t r, size_t j) const {
    int64_t sum = c0[r * n + j];
    for (size_t i = 0; i < k; ++i) sum += int64_t(a[r * k + i]) * int64_t(w[j * k + i]);
    return int32_t(sum);
  }
  // C as the unit stores it, rows 64 bytes apart; the bytes past each row's
  // 4n and past row m keep the 0x5a they had.
  template <class Tiles>
  std::vector<uint8_t> run() const {
    std::vector<uint8_t> out(16 * 64, 0x5a);
    Tiles::configure(shapes());
    Tiles::template load<0>(c_tile, 64);
    Tiles::template load<4>(a_tile, 64);
    Tiles::template load<6>(b_tile, 64);
    Tiles::template dpbsud<0, 4, 6>();
    Tiles::template store<0>(out.data(), 64);
    Tiles::release();
    return out;
  }
};

TEST(TileUnit, ModelFollowsTdpbsudsDefinition) {
  // The kernels' shape (16 tokens x 16 rows, one 32-element block), the
  // unit's largest (depth 64), and a ragged one.
  for (auto [m, n, k] : {std::array<size_t, 3>{16, 16, 32}, {16, 16, 64}, {7, 5, 12}}) {
    const Product p(m, n, k, uint32_t(m * 100 + n * 10 + k));
    const std::vector<uint8_t> out = p.run<EmulatedTiles>();
    for (size_t r = 0; r < 16; ++r)
      for (size_t j = 0; j < 16; ++j) {
        int32_t got;
        std::memcpy(&got, &out[64 * r + 4 * j], 4);
        if (r < m && j < n) ASSERT_EQ(got, p.want(r, j)) << m << "x" << n << "x" << k << " at " << r << "," << j;
        else ASSERT_EQ(uint32_t(got), 0x5a5a5a5au) << "stored outside the tile at " << r << "," << j;
      }
  }
}

TEST(TileUnit, ModelRefusesWhatTheHardwareFaultsOn) {
  EmulatedTiles::release();
  EXPECT_THROW(EmulatedTiles::zero<0>(), std::logic_error);  // no LDTILECFG yet
  const Product p(16, 16, 32, 1);
  TileShapes s = p.shapes();
  s[6].rows = 4;  // B holds depth 16, A depth 32
  EmulatedTiles::configure(s);
  EXPECT_THROW((EmulatedTiles::dpbsud<0, 4, 6>()), std::logic_error);
  EmulatedTiles::release();
}

TEST(TileUnit, HardwareMatchesTheModel) {
  if (kernels::cpu().best() != Isa::Amx)
    GTEST_SKIP() << "no usable AMX unit on this CPU (amx_tile " << kernels::cpu().amx_tile << ", amx_int8 "
                 << kernels::cpu().amx_int8 << ", OS " << kernels::cpu().amx_os << ", granted "
                 << kernels::cpu().amx_granted << ")";
  for (auto [m, n, k] : {std::array<size_t, 3>{16, 16, 32}, {16, 16, 64}, {7, 5, 12}}) {
    const Product p(m, n, k, uint32_t(m + n + k));
    EXPECT_EQ(p.run<AmxTiles>(), p.run<EmulatedTiles>()) << m << "x" << n << "x" << k;
  }
}

TEST(CpuFeatures, AmxNeedsTheAvx512SetEveryAmxFlagAndTheGrant) {
  kernels::CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = true;
  f.amx_tile = f.amx_int8 = f.amx_os = f.amx_granted = true;
  EXPECT_EQ(f.best(), Isa::Amx);
  for (bool kernels::CpuFeatures::*flag : {&kernels::CpuFeatures::amx_tile, &kernels::CpuFeatures::amx_int8,
                                           &kernels::CpuFeatures::amx_os, &kernels::CpuFeatures::amx_granted}) {
    kernels::CpuFeatures g = f;
    g.*flag = false;
    EXPECT_EQ(g.best(), Isa::Avx512);
  }
  f.avx512vnni = false;
  EXPECT_EQ(f.best(), Isa::Avx2);
}

// The tile kernels are opt-in (kernels::default_isa): selectable where the
// unit, or in tests its model, can run them, never the default.
TEST(CpuFeatures, AmxIsSelectableWithTheUnitOrItsModel) {
  EXPECT_EQ(kernels::default_isa(), std::min(kernels::cpu().best(), Isa::Avx512));
  if (kernels::cpu().best() == Isa::Amx) {
    test::IsaGuard amx(Isa::Amx);
    EXPECT_FALSE(kernels::tiles_emulated());
    return;
  }
  EXPECT_THROW(kernels::set_isa(Isa::Amx), Error);
  EXPECT_EQ(kernels::active_isa(), kernels::default_isa());
  if (kernels::cpu().best() != Isa::Avx512) return;  // the model needs the AVX-512 set around it
  {
    test::IsaGuard amx(Isa::Amx);
    EXPECT_TRUE(kernels::tiles_emulated());
    EXPECT_EQ(kernels::active_isa(), Isa::Amx);
  }
  EXPECT_FALSE(kernels::tiles_emulated());
  EXPECT_EQ(kernels::active_isa(), Isa::Avx512);
}

}  // namespace
}  // namespace kvlab

// The roofline verdict (lab/hardware/roofline.h) on numbers that can be checked by hand.
#include <gtest/gtest.h>

#include "common/error.h"
#include "lab/hardware/roofline.h"

namespace kvlab::perf {
namespace {

TEST(PerfRoofline, RidgeAndBound) {
  // 100 TFLOP/s over 1 TB/s: the roofs meet at 100 FLOP/byte.
  EXPECT_DOUBLE_EQ(ridge_point(100e12, 1e12), 100.0);
  EXPECT_EQ(bound_of(1e12, 1e12, 100e12, 1e12), Bound::Memory);   // 1 FLOP/byte
  EXPECT_EQ(bound_of(1e14, 1e12, 100e12, 1e12), Bound::Compute);  // at the ridge: compute
  EXPECT_EQ(bound_of(1e15, 1e12, 100e12, 1e12), Bound::Compute);
  EXPECT_DOUBLE_EQ(roofline_seconds(1e12, 1e12, 100e12, 1e12), 1.0);  // bytes dominate
  EXPECT_DOUBLE_EQ(roofline_seconds(1e15, 1e9, 100e12, 1e12), 10.0);  // FLOPs dominate
  EXPECT_EQ(bound_name(Bound::Memory), "memory-bound");
}

TEST(PerfRoofline, VerdictOfAMeasuredKernel) {
  // 16 GFLOP over 16 GB in 8 ms on 1000 TFLOP/s, 4 TB/s.
  const Verdict v = roofline_verdict(16e9, 16e9, 8e-3, 1000e12, 4e12);
  EXPECT_DOUBLE_EQ(v.intensity, 1.0);
  EXPECT_DOUBLE_EQ(v.ridge, 250.0);
  EXPECT_EQ(v.bound, Bound::Memory);
  EXPECT_DOUBLE_EQ(v.achieved_bytes_per_s, 2e12);
  EXPECT_DOUBLE_EQ(v.bw_utilization, 0.5);
  EXPECT_DOUBLE_EQ(v.achieved_flops, 2e12);
  EXPECT_DOUBLE_EQ(v.flops_utilization, 0.002);
  EXPECT_DOUBLE_EQ(v.roof_seconds, 4e-3);
  EXPECT_DOUBLE_EQ(v.roof_fraction, 0.5);
}

TEST(PerfRoofline, RejectsNonsense) {
  try {
    roofline_verdict(1, 1, 0, 1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "roofline: seconds must be positive");
  }
  EXPECT_THROW(roofline_verdict(1, 1, 1, 0, 1), Error);
  EXPECT_THROW(roofline_verdict(0, 0, 1, 1, 1), Error);
  EXPECT_THROW(roofline_verdict(-1, 1, 1, 1, 1), Error);
}

}  // namespace
}  // namespace kvlab::perf

// The roofline model (Williams, Waterman, Patterson, "Roofline: an insightful
// visual performance model for multicore architectures", CACM 52(4), 2009):
// a kernel that does F FLOPs and moves M bytes cannot take less than
// max(F / peak_flops, M / peak_bandwidth). Which term is larger names the bound.
//
// Pure functions of numbers, so the engine (measured seconds) and the
// simulator (predicted seconds) reach the same verdict the same way.
#pragma once
#include <string_view>

namespace kvlab::perf {

enum class Bound { Memory, Compute };
std::string_view bound_name(Bound b);  // "memory-bound", "compute-bound"

// Arithmetic intensity at which both roofs meet, FLOP/byte.
double ridge_point(double peak_flops, double peak_bytes_per_s);

// Which roof limits a kernel of `flops` and `bytes` (ties count as compute).
Bound bound_of(double flops, double bytes, double peak_flops, double peak_bytes_per_s);

// The shortest time the roofline allows, seconds.
double roofline_seconds(double flops, double bytes, double peak_flops, double peak_bytes_per_s);

struct Verdict {
  double intensity = 0;         // FLOP/byte of the kernel
  double ridge = 0;             // FLOP/byte where the roofs meet
  Bound bound = Bound::Memory;  // the roof that applies at this intensity
  double achieved_flops = 0;    // FLOP/s actually reached
  double achieved_bytes_per_s = 0;
  double flops_utilization = 0;  // achieved / peak FLOP/s (MFU)
  double bw_utilization = 0;     // achieved / peak bandwidth (MBU)
  double roof_seconds = 0;       // roofline_seconds()
  double roof_fraction = 0;      // roof_seconds / seconds: 1 = on the roof
};

// Achieved against peak for a kernel that took `seconds`. Throws kvlab::Error
// when seconds, a peak, or both flops and bytes are not positive.
Verdict roofline_verdict(double flops, double bytes, double seconds, double peak_flops, double peak_bytes_per_s);

}  // namespace kvlab::perf

#include "lab/hardware/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace kvlab::perf {

std::string_view bound_name(Bound b) { return b == Bound::Memory ? "memory-bound" : "compute-bound"; }

double ridge_point(double peak_flops, double peak_bytes_per_s) { return peak_flops / peak_bytes_per_s; }

Bound bound_of(double flops, double bytes, double peak_flops, double peak_bytes_per_s) {
  return flops / peak_flops >= bytes / peak_bytes_per_s ? Bound::Compute : Bound::Memory;
}

double roofline_seconds(double flops, double bytes, double peak_flops, double peak_bytes_per_s) {
  return std::max(flops / peak_flops, bytes / peak_bytes_per_s);
}

Verdict roofline_verdict(double flops, double bytes, double seconds, double peak_flops, double peak_bytes_per_s) {
  if (!(seconds > 0) || !std::isfinite(seconds)) throw Error("roofline: seconds must be positive");
  if (!(peak_flops > 0) || !(peak_bytes_per_s > 0)) throw Error("roofline: peaks must be positive");
  if (!(flops >= 0) || !(bytes >= 0) || (flops == 0 && bytes == 0))
    throw Error("roofline: flops and bytes must be non-negative and not both zero");
  Verdict v;
  v.intensity = bytes > 0 ? flops / bytes : std::numeric_limits<double>::infinity();
  v.ridge = ridge_point(peak_flops, peak_bytes_per_s);
  v.bound = bound_of(flops, bytes, peak_flops, peak_bytes_per_s);
  v.achieved_flops = flops / seconds;
  v.achieved_bytes_per_s = bytes / seconds;
  v.flops_utilization = v.achieved_flops / peak_flops;
  v.bw_utilization = v.achieved_bytes_per_s / peak_bytes_per_s;
  v.roof_seconds = roofline_seconds(flops, bytes, peak_flops, peak_bytes_per_s);
  v.roof_fraction = v.roof_seconds / seconds;
  return v;
}

}  // namespace kvlab::perf

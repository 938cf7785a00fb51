// Human-readable numbers for reports: SI prefixes (1 GB = 1e9 bytes, the unit
// bandwidths are quoted in), three significant digits.
#pragma once
#include <string>

namespace kvlab::perf {

std::string fmt_num(double v, int significant = 3);  // 0.00123 -> "0.00123", 12345 -> "12300"
std::string fmt_seconds(double s);                   // "6.95 ms", "1.23 s", "850 us", "0.467 ns"
std::string fmt_bytes(double b);                     // "16.1 GB"
std::string fmt_bandwidth(double bytes_per_s);       // "3.35 TB/s"
std::string fmt_flops(double flops_per_s);           // "989 TFLOP/s"
std::string fmt_flop_count(double flops);            // "16.1 GFLOP"
std::string fmt_percent(double fraction);            // 0.0123 -> "1.2%"
std::string fmt_factor(double x);                    // 2.0 -> "2.0x", 0.123 -> "0.12x"

}  // namespace kvlab::perf

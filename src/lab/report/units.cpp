#include "lab/report/units.h"

#include <cmath>
#include <cstdio>

namespace kvlab::perf {

namespace {

std::string print(const char* fmt, double v, const char* unit = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

// Scales v by powers of 1000 and appends the SI prefix to `unit`.
std::string si(double v, const char* unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 999.5 && i < 6) {
    a /= 1000.0;
    v /= 1000.0;
    ++i;
  }
  return fmt_num(v) + " " + prefixes[i] + unit;
}

}  // namespace

std::string fmt_num(double v, int significant) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : (v < 0 ? "-inf" : "nan");
  if (v == 0) return "0";
  const int digits = int(std::floor(std::log10(std::fabs(v)))) + 1;
  const int decimals = std::max(0, significant - digits);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_seconds(double s) {
  if (std::fabs(s) >= 1.0) return fmt_num(s) + " s";
  if (std::fabs(s) >= 1e-3) return fmt_num(s * 1e3) + " ms";
  if (s != 0 && std::fabs(s) < 1e-6) return fmt_num(s * 1e9) + " ns";
  return fmt_num(s * 1e6) + " us";
}

std::string fmt_bytes(double b) { return si(b, "B"); }
std::string fmt_bandwidth(double bytes_per_s) { return si(bytes_per_s, "B/s"); }
std::string fmt_flops(double flops_per_s) { return si(flops_per_s, "FLOP/s"); }
std::string fmt_flop_count(double flops) { return si(flops, "FLOP"); }

std::string fmt_percent(double fraction) {
  const double p = fraction * 100.0;
  if (std::fabs(p) < 1.0) return fmt_num(p, 2) + "%";
  return print(std::fabs(p) >= 10 ? "%.0f%%%s" : "%.1f%%%s", p);
}

std::string fmt_factor(double x) { return fmt_num(x, 2) + "x"; }

}  // namespace kvlab::perf

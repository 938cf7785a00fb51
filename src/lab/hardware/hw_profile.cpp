#include "lab/hardware/hw_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/parse_json.h"
#include "kernels/attention.h"

namespace kvlab::perf {

namespace {

using nlohmann::json;

[[noreturn]] void field_error(std::string_view origin, std::string_view field, std::string_view expected) {
  throw Error(std::string(origin) + ": field '" + std::string(field) + "' " + std::string(expected));
}

double positive_number(const json& j, std::string_view origin, const char* key) {
  if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() > 0))
    field_error(origin, key, "missing or not a positive number");
  return j[key].get<double>();
}

int positive_int(const json& j, std::string_view origin, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    field_error(origin, key, "missing or not a positive integer");
  return j[key].get<int>();
}

std::string text(const json& j, std::string_view origin, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) field_error(origin, key, "missing or not a string");
  return j[key].get<std::string>();
}

uint64_t optional_bytes(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}

double non_negative(const json& j, std::string_view origin, const char* key) {
  if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() >= 0))
    field_error(origin, key, "missing or not a non-negative number");
  return j[key].get<double>();
}

// A non-negative figure that later probes added: 0 in profiles from before it was measured.
double optional_figure(const json& j, std::string_view origin, const char* key) {
  return j.contains(key) ? non_negative(j, origin, key) : 0.0;
}

KernelRates parse_kernels(const json& j, std::string_view origin) {
  if (!j.is_object()) field_error(origin, "kernels", "must be an object");
  const std::string where = std::string(origin) + ": kernels";
  KernelRates k;
  k.threads = positive_int(j, where, "threads");
  k.dispatch_s = non_negative(j, where, "dispatch_s");
  k.gemv_working_set_bytes = optional_figure(j, where, "gemv_working_set_bytes");
  k.elementwise_flops_per_s = positive_number(j, where, "elementwise_flops_per_s");
  if (!j.contains("matmul") || !j["matmul"].is_array()) field_error(where, "matmul", "missing or not an array");
  for (const json& e : j["matmul"]) {
    if (!e.is_object()) field_error(where, "matmul", "entries must be objects");
    k.matmul.push_back({text(e, where, "weights"), positive_number(e, where, "gemv_bytes_per_s"),
                        non_negative(e, where, "gemv_row_s"), non_negative(e, where, "gemv_call_s"),
                        positive_number(e, where, "gemm_ops_per_s"),
                        optional_figure(e, where, "gemm_input_s"), optional_figure(e, where, "gemm_output_s")});
  }
  if (!j.contains("attention") || !j["attention"].is_array()) field_error(where, "attention", "missing or not an array");
  for (const json& e : j["attention"]) {
    if (!e.is_object()) field_error(where, "attention", "entries must be objects");
    // Profiles from before the rates were kept per pass width timed passes of 4.
    const int heads = e.contains("heads") ? positive_int(e, where, "heads") : kernels::kAttnHeadsPerPass;
    if (heads > kernels::kAttnHeadsPerPass) field_error(where, "heads", "over the kernels' pass width");
    k.attention.push_back({text(e, where, "kv"), positive_int(e, where, "head_dim"), heads,
                           positive_number(e, where, "decode_flops_per_s"),
                           positive_number(e, where, "prefill_flops_per_s"),
                           optional_figure(e, where, "prefill_task_s")});
  }
  return k;
}

}  // namespace

const MatmulRate* KernelRates::find_matmul(std::string_view weights) const {
  for (const MatmulRate& m : matmul)
    if (m.weights == weights) return &m;
  return nullptr;
}

const AttentionRate* KernelRates::find_attention(std::string_view kv, int head_dim, int heads) const {
  const AttentionRate* best = nullptr;
  for (const AttentionRate& a : attention)
    if (a.kv == kv && a.heads == heads &&
        (!best || std::abs(a.head_dim - head_dim) < std::abs(best->head_dim - head_dim)))
      best = &a;
  return best;
}

std::optional<AttentionRate> KernelRates::attention_for_group(std::string_view kv, int head_dim, int group) const {
  if (group <= 0) return std::nullopt;
  double decode_s = 0, prefill_s = 0, task_s = 0;  // seconds per FLOP, summed over the passes; per task, too
  int measured_dim = 0;
  for (int g0 = 0; g0 < group; g0 += kernels::kAttnHeadsPerPass) {
    const int heads = std::min(kernels::kAttnHeadsPerPass, group - g0);
    const AttentionRate* a = find_attention(kv, head_dim, heads);
    if (!a) return std::nullopt;
    decode_s += heads / a->decode_flops_per_s;
    prefill_s += heads / a->prefill_flops_per_s;
    task_s += a->prefill_task_s;  // a task runs every pass of its group
    measured_dim = a->head_dim;
  }
  return AttentionRate{std::string(kv), measured_dim, group, group / decode_s, group / prefill_s, task_s};
}

double cache_speedup(const std::vector<SizedBandwidth>& curve, double bytes) {
  if (curve.empty()) return 1.0;
  const double dram = curve.back().bytes_per_s;
  double bw = curve.front().bytes_per_s;
  if (bytes >= curve.back().bytes) {
    bw = dram;
  } else {
    for (size_t i = 1; i < curve.size(); ++i) {
      const SizedBandwidth &a = curve[i - 1], &b = curve[i];
      if (bytes >= b.bytes) continue;
      if (bytes > a.bytes) {
        const double f = std::log(bytes / a.bytes) / std::log(b.bytes / a.bytes);
        bw = a.bytes_per_s + f * (b.bytes_per_s - a.bytes_per_s);
      } else {
        bw = a.bytes_per_s;
      }
      break;
    }
  }
  return std::max(1.0, bw / dram);
}

double HwProfile::best_read_bw() const {
  double best = 0;
  for (const BandwidthPoint& p : mem_read_bw) best = std::max(best, p.bytes_per_s);
  return best;
}

std::string default_hw_profile_path() {
  namespace fs = std::filesystem;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "kvlab" / "hw-profile.json").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".cache" / "kvlab" / "hw-profile.json").string();
}

HwProfile parse_hw_profile(std::string_view json_text, std::string_view origin) {
  const json j = parse_json(json_text, origin);
  if (!j.is_object()) throw Error(std::string(origin) + ": expected a JSON object");
  if (text(j, origin, "format") != kHwProfileFormat)
    field_error(origin, "format", "must be \"" + std::string(kHwProfileFormat) + "\"");

  HwProfile p;
  p.date = text(j, origin, "date");
  p.cpu_model = text(j, origin, "cpu_model");
  p.cores = positive_int(j, origin, "cores");
  p.threads = positive_int(j, origin, "threads");
  p.simd = text(j, origin, "simd");
  if (j.contains("caches") && j["caches"].is_object()) {
    p.l1d_bytes = optional_bytes(j["caches"], "l1d_bytes");
    p.l2_bytes = optional_bytes(j["caches"], "l2_bytes");
    p.l3_bytes = optional_bytes(j["caches"], "l3_bytes");
  }
  p.mem_bytes = uint64_t(positive_number(j, origin, "mem_bytes"));
  if (!j.contains("mem_read_bw") || !j["mem_read_bw"].is_array() || j["mem_read_bw"].empty())
    field_error(origin, "mem_read_bw", "missing or not a non-empty array of {threads, bytes_per_s}");
  for (const json& point : j["mem_read_bw"]) {
    if (!point.is_object()) field_error(origin, "mem_read_bw", "entries must be objects");
    BandwidthPoint b{positive_int(point, origin, "threads"), positive_number(point, origin, "bytes_per_s")};
    if (point.contains("sustained_bytes_per_s")) b.sustained_bytes_per_s = positive_number(point, origin, "sustained_bytes_per_s");
    p.mem_read_bw.push_back(b);
  }
  if (j.contains("read_bw_by_size")) {
    if (!j["read_bw_by_size"].is_array()) field_error(origin, "read_bw_by_size", "must be an array of {bytes, bytes_per_s}");
    for (const json& point : j["read_bw_by_size"]) {
      if (!point.is_object()) field_error(origin, "read_bw_by_size", "entries must be objects");
      const SizedBandwidth b{positive_number(point, origin, "bytes"), positive_number(point, origin, "bytes_per_s")};
      if (!p.read_bw_by_size.empty() && !(b.bytes > p.read_bw_by_size.back().bytes))
        field_error(origin, "read_bw_by_size", "sizes must be strictly ascending");
      p.read_bw_by_size.push_back(b);
    }
  }
  p.peak_fp32_flops = positive_number(j, origin, "peak_fp32_flops");
  if (j.contains("peak_int8_ops")) {
    if (!j["peak_int8_ops"].is_number() || j["peak_int8_ops"].get<double>() < 0)
      field_error(origin, "peak_int8_ops", "must be a non-negative number");
    p.peak_int8_ops = j["peak_int8_ops"].get<double>();
  }
  if (j.contains("kernels")) {
    try {
      p.kernels = parse_kernels(j["kernels"], origin);
    } catch (const Error& e) {
      p.kernels_error = e.what();
    }
  }
  return p;
}

std::string hw_profile_to_json(const HwProfile& p) {
  json bw = json::array();
  for (const BandwidthPoint& b : p.mem_read_bw) {
    json point = {{"threads", b.threads}, {"bytes_per_s", b.bytes_per_s}};
    if (b.sustained_bytes_per_s > 0) point["sustained_bytes_per_s"] = b.sustained_bytes_per_s;
    bw.push_back(point);
  }
  json j = {{"format", kHwProfileFormat},
                  {"date", p.date},
                  {"cpu_model", p.cpu_model},
                  {"cores", p.cores},
                  {"threads", p.threads},
                  {"simd", p.simd},
                  {"caches", {{"l1d_bytes", p.l1d_bytes}, {"l2_bytes", p.l2_bytes}, {"l3_bytes", p.l3_bytes}}},
                  {"mem_bytes", p.mem_bytes},
                  {"mem_read_bw", bw},
                  {"peak_fp32_flops", p.peak_fp32_flops},
                  {"peak_int8_ops", p.peak_int8_ops}};
  if (!p.read_bw_by_size.empty()) {
    json sized = json::array();
    for (const SizedBandwidth& b : p.read_bw_by_size) sized.push_back({{"bytes", b.bytes}, {"bytes_per_s", b.bytes_per_s}});
    j["read_bw_by_size"] = sized;
  }
  if (p.kernels) {
    json mm = json::array(), att = json::array();
    for (const MatmulRate& m : p.kernels->matmul) {
      mm.push_back({{"weights", m.weights},
                    {"gemv_bytes_per_s", m.gemv_bytes_per_s},
                    {"gemv_row_s", m.gemv_row_s},
                    {"gemv_call_s", m.gemv_call_s},
                    {"gemm_ops_per_s", m.gemm_ops_per_s},
                    {"gemm_input_s", m.gemm_input_s},
                    {"gemm_output_s", m.gemm_output_s}});
    }
    for (const AttentionRate& a : p.kernels->attention)
      att.push_back({{"kv", a.kv},
                     {"head_dim", a.head_dim},
                     {"heads", a.heads},
                     {"decode_flops_per_s", a.decode_flops_per_s},
                     {"prefill_flops_per_s", a.prefill_flops_per_s},
                     {"prefill_task_s", a.prefill_task_s}});
    j["kernels"] = {{"threads", p.kernels->threads},
                    {"matmul", mm},
                    {"attention", att},
                    {"elementwise_flops_per_s", p.kernels->elementwise_flops_per_s},
                    {"dispatch_s", p.kernels->dispatch_s},
                    {"gemv_working_set_bytes", p.kernels->gemv_working_set_bytes}};
  }
  return j.dump(2) + "\n";
}

HwProfile load_hw_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("no hardware profile at " + path + ": run `kvlab probe` to measure this machine first");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hw_profile(ss.str(), path);
}

}  // namespace kvlab::perf

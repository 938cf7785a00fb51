#include "lab/hardware/interconnect.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "common/error.h"

namespace kvlab::perf {

namespace {

constexpr double G = 1e9, us = 1e-6;

// NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc, hwLat: a ring step
// with the LL protocol, which it picks for the few-kB messages of batch-1
// inference) puts one hop at 0.6 us over NVLink and 1.0 us over PCIe.
constexpr double kNvlinkHop = 0.6 * us, kPcieHop = 1.0 * us;

// clang-format off
std::vector<Link> build_links() {
  return {
      {.id = "nvlink3", .name = "NVLink 3", .bytes_per_s = 600 * G / 2, .hop_latency_s = kNvlinkHop,
       .source = "NVIDIA A100 Tensor Core GPU datasheet (NVLink: 600 GB/s, both directions together); hop latency: "
                 "NCCL src/graph/tuning.cc (ring, LL)"},
      {.id = "nvlink4", .name = "NVLink 4", .bytes_per_s = 900 * G / 2,
       .hop_latency_s = kNvlinkHop,
       .source = "NVIDIA H100 Tensor Core GPU datasheet, SXM column (NVLink: 900 GB/s, both directions together); "
                 "hop latency: NCCL src/graph/tuning.cc (ring, LL)"},
      {.id = "nvlink5", .name = "NVLink 5", .bytes_per_s = 1800 * G / 2, .hop_latency_s = kNvlinkHop,
       .source = "NVIDIA DGX B200 / HGX B200 datasheet (NVLink 5: 1.8 TB/s per GPU, both directions together); hop "
                 "latency: NCCL src/graph/tuning.cc (ring, LL)"},
      {.id = "pcie4", .name = "PCIe 4.0 x16", .bytes_per_s = 31.5 * G, .hop_latency_s = kPcieHop,
       .source = "PCI-SIG PCIe 4.0 base specification: 16 GT/s per lane, 128b/130b, x16 = 31.5 GB/s per direction; "
                 "hop latency: NCCL src/graph/tuning.cc (ring, LL)"},
      {.id = "pcie5", .name = "PCIe 5.0 x16", .bytes_per_s = 63 * G, .hop_latency_s = kPcieHop,
       .source = "PCI-SIG PCIe 5.0 base specification: 32 GT/s per lane, 128b/130b, x16 = 63 GB/s per direction; "
                 "hop latency: NCCL src/graph/tuning.cc (ring, LL)"},
  };
}
// clang-format on

}  // namespace

std::span<const Link> link_catalog() {
  static const std::vector<Link> links = build_links();
  return links;
}

const Link& find_link(std::string_view id) {
  std::string key(id), ids;
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const Link& l : link_catalog()) {
    if (l.id == key) return l;
    ids += (ids.empty() ? "" : ", ") + l.id;
  }
  throw Error("unknown link '" + std::string(id) + "' (expected one of: " + ids + ")");
}

}  // namespace kvlab::perf

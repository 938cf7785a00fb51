#include "lab/hardware/hardware.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <utility>

#include "common/error.h"

namespace kvlab::perf {

namespace {

constexpr double T = 1e12, G = 1e9;

// clang-format off
std::vector<Hardware> nvidia_datacenter_gpus() {
  // NVIDIA datasheets quote tensor-core rates with 2:4 sparsity (asterisked);
  // dense = sparse / 2. FP32 (non-tensor) figures are dense as printed.
  const std::string nv_sparse = "datasheet tensor figures are with sparsity; dense = half";
  return {
      {.id = "h100",
       .aliases = {"h100-sxm", "h100-sxm5"},
       .name = "NVIDIA H100 SXM5 80GB",
       .fp32 = 67 * T, .tf32 = 989 * T / 2, .bf16 = 1979 * T / 2, .fp8 = 3958 * T / 2, .int8 = 3958 * T / 2,
       .mem_bw = 3.35e12, .mem_bytes = 80 * G, .memory = "80 GB HBM3", .memory_class = MemoryClass::Hbm,
       .source = "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (TF32 989*, BF16 1,979*, FP8 3,958*, "
                 "INT8 3,958* TOPS; FP32 67 TF; 3.35 TB/s; NVLink 900 GB/s)",
       .compute_note = nv_sparse, .sparse_halved = true, .link = "nvlink4"},
      {.id = "h200",
       .aliases = {"h200-sxm"},
       .name = "NVIDIA H200 SXM 141GB",
       .fp32 = 67 * T, .tf32 = 989 * T / 2, .bf16 = 1979 * T / 2, .fp8 = 3958 * T / 2, .int8 = 3958 * T / 2,
       .mem_bw = 4.8e12, .mem_bytes = 141 * G, .memory = "141 GB HBM3e", .memory_class = MemoryClass::Hbm,
       .source = "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (tensor rates as H100 SXM; 4.8 TB/s, 141 GB; NVLink 900 GB/s)",
       .compute_note = nv_sparse, .sparse_halved = true, .link = "nvlink4"},
      {.id = "a100",
       .aliases = {"a100-80gb", "a100-sxm"},
       .name = "NVIDIA A100 SXM4 80GB",
       .fp32 = 19.5 * T, .tf32 = 156 * T, .bf16 = 312 * T, .int8 = 624 * T,
       .mem_bw = 2.039e12, .mem_bytes = 80 * G, .memory = "80 GB HBM2e", .memory_class = MemoryClass::Hbm,
       .source = "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column (TF32 156, BF16 312, INT8 624 dense; "
                 "2,039 GB/s; NVLink 600 GB/s)",
       .compute_note = "datasheet prints dense figures, sparse ones (x2) marked *", .link = "nvlink3"},
      {.id = "a100-pcie",
       .aliases = {"a100-80gb-pcie"},
       .name = "NVIDIA A100 80GB PCIe",
       .fp32 = 19.5 * T, .tf32 = 156 * T, .bf16 = 312 * T, .int8 = 624 * T,
       .mem_bw = 1.935e12, .mem_bytes = 80 * G, .memory = "80 GB HBM2e", .memory_class = MemoryClass::Hbm,
       .source = "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB PCIe column (TF32 156, BF16 312, INT8 624 dense; "
                 "1,935 GB/s; PCIe Gen4 64 GB/s, NVLink bridge for 2 GPUs 600 GB/s)",
       .compute_note = "datasheet prints dense figures, sparse ones (x2) marked *; the NVLink bridge pairs only two "
                       "cards, so PCIe is the default link",
       .link = "pcie4"},
      {.id = "l4",
       .aliases = {"nvidia-l4"},
       .name = "NVIDIA L4 24GB",
       .fp32 = 30.3 * T, .tf32 = 120 * T / 2, .bf16 = 242 * T / 2, .fp8 = 485 * T / 2, .int8 = 485 * T / 2,
       .mem_bw = 300 * G, .mem_bytes = 24 * G, .memory = "24 GB GDDR6", .memory_class = MemoryClass::Gddr,
       .source = "NVIDIA L4 Tensor Core GPU datasheet (TF32 120*, BF16 242*, FP8 485*, INT8 485* TOPS; FP32 30.3 TF; "
                 "300 GB/s; PCIe Gen4 x16, no NVLink)",
       .compute_note = nv_sparse, .sparse_halved = true, .link = "pcie4"},
      {.id = "l40s",
       .aliases = {"nvidia-l40s"},
       .name = "NVIDIA L40S 48GB",
       .fp32 = 91.6 * T, .tf32 = 366 * T / 2, .bf16 = 733 * T / 2, .fp8 = 1466 * T / 2, .int8 = 1466 * T / 2,
       .mem_bw = 864 * G, .mem_bytes = 48 * G, .memory = "48 GB GDDR6", .memory_class = MemoryClass::Gddr,
       .source = "NVIDIA L40S GPU datasheet (TF32 366*, BF16 733*, FP8 1,466*, INT8 1,466* TOPS; FP32 91.6 TF; "
                 "864 GB/s; PCIe Gen4 x16, no NVLink)",
       .compute_note = nv_sparse, .sparse_halved = true, .link = "pcie4"},
  };
}

// GeForce whitepapers print dense and sparse columns; these are the dense ones.
std::vector<Hardware> nvidia_geforce_gpus() {
  return {
      {.id = "rtx4090",
       .aliases = {"rtx-4090", "4090"},
       .name = "NVIDIA GeForce RTX 4090",
       .fp32 = 82.6 * T, .tf32 = 82.6 * T, .bf16 = 165.2 * T, .fp16 = 330.3 * T, .fp8 = 330.3 * T, .int8 = 660.6 * T,
       .mem_bw = 1008 * G, .mem_bytes = 24 * G, .memory = "24 GB GDDR6X", .memory_class = MemoryClass::Gddr,
       .source = "NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090 column (dense/sparse pairs; BF16 "
                 "and FP8 with FP32 accumulate 165.2 / 330.3, FP16 with FP16 accumulate 330.3; PCIe 4.0 x16, no NVLink)",
       .compute_note = "dense column of the whitepaper; GeForce runs FP16 with FP32 accumulate (the bf16 figure) at half "
                       "the FP16-accumulate rate (the fp16 figure)",
       .link = "pcie4"},
      {.id = "rtx3090",
       .aliases = {"rtx-3090", "3090"},
       .name = "NVIDIA GeForce RTX 3090",
       .fp32 = 35.6 * T, .tf32 = 35.6 * T, .bf16 = 71 * T, .fp16 = 142 * T, .int8 = 284 * T,
       .mem_bw = 936 * G, .mem_bytes = 24 * G, .memory = "24 GB GDDR6X", .memory_class = MemoryClass::Gddr,
       .source = "NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 column (BF16 with FP32 "
                 "accumulate 71 dense / 142 sparse, FP16 with FP16 accumulate 142 dense; PCIe 4.0 x16)",
       .compute_note = "dense column of the whitepaper; GeForce runs FP16 with FP32 accumulate (the bf16 figure) at half "
                       "the FP16-accumulate rate (the fp16 figure); its 2-way "
                       "NVLink bridge is optional, so PCIe is the default link",
       .link = "pcie4"},
  };
}

std::vector<Hardware> apple_socs() {
  // Apple publishes bandwidth and memory, not FLOP/s: FP32 = GPU cores x 128
  // ALUs x 2 (FMA) x clock, and Apple GPUs run FP16 at the FP32 rate.
  return {
      {.id = "m2-ultra",
       .aliases = {"m2ultra"},
       .name = "Apple M2 Ultra (76-core GPU)",
       .kind = HwKind::AppleSoc,
       .fp32 = 27.2 * T, .bf16 = 27.2 * T,
       .mem_bw = 800 * G, .mem_bytes = 192 * G, .memory = "192 GB LPDDR5 unified", .memory_class = MemoryClass::UnifiedLpddr,
       .source = "Apple newsroom, \"Apple introduces M2 Ultra\" (June 2023): 76-core GPU, 800 GB/s, up to 192 GB",
       .compute_note = "derived: 76 cores x 128 ALUs x 2 FLOP x 1.398 GHz (clock from third-party measurements)"},
      {.id = "m1-max",
       .aliases = {"m1max"},
       .name = "Apple M1 Max (32-core GPU)",
       .kind = HwKind::AppleSoc,
       .fp32 = 10.4 * T, .bf16 = 10.4 * T,
       .mem_bw = 400 * G, .mem_bytes = 64 * G, .memory = "64 GB LPDDR5 unified", .memory_class = MemoryClass::UnifiedLpddr,
       .source = "Apple newsroom, \"Introducing M1 Pro and M1 Max\" (October 2021): 32-core GPU, 10.4 teraflops, 400 GB/s, "
                 "up to 64 GB",
       .compute_note = "Apple's FP32 figure; Apple GPUs run FP16 at the FP32 rate"},
      {.id = "m3-max",
       .aliases = {"m3max"},
       .name = "Apple M3 Max (40-core GPU)",
       .kind = HwKind::AppleSoc,
       .fp32 = 14.3 * T, .bf16 = 14.3 * T,
       .mem_bw = 400 * G, .mem_bytes = 128 * G, .memory = "128 GB LPDDR5 unified", .memory_class = MemoryClass::UnifiedLpddr,
       .source = "Apple newsroom, M3 family announcement (October 2023): 40-core GPU, 400 GB/s, up to 128 GB",
       .compute_note = "derived: 40 cores x 128 ALUs x 2 FLOP x ~1.4 GHz (clock from third-party measurements)"},
  };
}

std::vector<Hardware> cpus() {
  // Zen 4 executes AVX-512 on two 256-bit FMA pipes: 32 FP32 FLOP/cycle/core;
  // VDPBF16PS doubles that; VPDPBUSD does 2 x 32 int8 MACs = 128 op/cycle.
  return {
      {.id = "epyc-9654",
       .aliases = {"zen4", "epyc"},
       .name = "AMD EPYC 9654 (Zen 4, 96 cores, one socket)",
       .kind = HwKind::Cpu,
       .fp32 = 96 * 32 * 2.4e9, .bf16 = 96 * 64 * 2.4e9, .int8 = 96 * 128 * 2.4e9,
       .mem_bw = 460.8 * G, .mem_bytes = 768 * G, .memory = "768 GB DDR5-4800 (12 x 64 GB, one DIMM per channel)",
       .memory_class = MemoryClass::Ddr,
       .source = "AMD EPYC 9654 product page (96 cores, 2.4 GHz base, 12 channels DDR5-4800 = 460.8 GB/s per socket)",
       .compute_note = "derived at base clock from Zen 4 execution width (AMD Zen 4 software optimization guide)"},
      {.id = "threadripper-pro-5995wx",
       .aliases = {"5995wx"},
       .name = "AMD Ryzen Threadripper PRO 5995WX (Zen 3, 64 cores)",
       .kind = HwKind::Cpu,
       .fp32 = 64 * 32 * 2.7e9, .bf16 = 64 * 32 * 2.7e9, .int8 = 64 * 64 * 2.7e9,
       .mem_bw = 204.8 * G, .mem_bytes = 2048 * G, .memory = "up to 2 TB DDR4-3200 (eight channels)",
       .memory_class = MemoryClass::Ddr,
       .source = "AMD Ryzen Threadripper PRO 5995WX product page (64 cores, 2.7 GHz base, eight channels of "
                 "DDR4-3200 = 204.8 GB/s, up to 2 TB)",
       .compute_note = "derived at base clock: Zen 3 has two 256-bit FMA pipes (32 FP32 FLOP/cycle) and one 256-bit "
                       "vpmaddubsw per cycle (64 int8 op/cycle, what kvlab probe measures on Zen 3: docs/perf-model.md "
                       "section 6); no bf16 instructions, so 16-bit math runs at the fp32 rate"},
      {.id = "ryzen-7950x",
       .aliases = {"7950x"},
       .name = "AMD Ryzen 9 7950X (Zen 4, 16 cores)",
       .kind = HwKind::Cpu,
       .fp32 = 16 * 32 * 4.5e9, .bf16 = 16 * 64 * 4.5e9, .int8 = 16 * 128 * 4.5e9,
       .mem_bw = 83.2 * G, .mem_bytes = 128 * G, .memory = "128 GB DDR5-5200 (two channels)",
       .memory_class = MemoryClass::Ddr,
       .source = "AMD Ryzen 9 7950X product page (16 cores, 4.5 GHz base, two channels of DDR5-5200 = 83.2 GB/s, up "
                 "to 128 GB)",
       .compute_note = "derived at base clock from Zen 4 execution width (AMD Zen 4 software optimization guide)"},
  };
}
// clang-format on

std::vector<Hardware> build_catalog() {
  std::vector<Hardware> catalog;
  for (auto* group : {nvidia_datacenter_gpus, nvidia_geforce_gpus, apple_socs, cpus})
    for (Hardware& h : group()) catalog.push_back(std::move(h));
  return catalog;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& ch : r) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

}  // namespace

std::string_view hw_kind_name(HwKind k) {
  switch (k) {
    case HwKind::Gpu:
      return "gpu";
    case HwKind::AppleSoc:
      return "apple-soc";
    case HwKind::Cpu:
      return "cpu";
  }
  return "?";
}

std::string_view memory_class_name(MemoryClass c) {
  switch (c) {
    case MemoryClass::Hbm:
      return "HBM";
    case MemoryClass::Gddr:
      return "GDDR";
    case MemoryClass::UnifiedLpddr:
      return "LPDDR unified";
    case MemoryClass::Ddr:
      return "DDR";
  }
  return "?";
}

std::optional<double> Hardware::peak(Precision p) const {
  switch (p) {
    case Precision::FP32:
      return fp32;
    case Precision::TF32:
      return tf32;
    case Precision::BF16:
      return bf16;
    case Precision::FP16:
      return fp16;
    case Precision::FP8:
      return fp8;
    case Precision::INT8:
      return int8;
  }
  return std::nullopt;
}

double Hardware::compute_peak(Precision wanted, Precision* used) const {
  const Precision chain[] = {wanted, Precision::BF16, Precision::FP32};
  for (Precision p : chain) {
    if (p == Precision::BF16 && wanted == Precision::FP32) continue;  // never narrow f32 math
    if (std::optional<double> v = peak(p)) {
      if (used) *used = p;
      return *v;
    }
  }
  throw Error("hardware '" + id + "' has no FP32 peak");
}

std::span<const Hardware> hardware_catalog() {
  static const std::vector<Hardware> catalog = build_catalog();
  return catalog;
}

Hardware hardware_from_profile(const HwProfile& p, std::string_view origin) {
  Hardware h;
  h.id = "this";
  h.aliases = {"this-machine", "local"};
  h.name = "this machine (" + p.cpu_model + ", " + std::to_string(p.cores) + " cores, " + p.simd + ")";
  h.kind = HwKind::Cpu;
  h.fp32 = p.peak_fp32_flops;
  if (p.peak_int8_ops > 0) h.int8 = p.peak_int8_ops;
  h.mem_bw = p.best_read_bw();
  h.mem_bytes = double(p.mem_bytes);
  h.memory = "system RAM";
  h.memory_class = MemoryClass::Ddr;
  h.source = "kvlab probe, " + p.date + " (" + std::string(origin) + ")";
  if (!p.kernels_error.empty()) h.source += "; its kernel figures are ignored: " + p.kernels_error;
  h.compute_note = "measured by kvlab probe: FMA and int8-dot loops on all threads";
  h.kernels = p.kernels;
  h.read_bw_by_size = p.read_bw_by_size;
  return h;
}

Hardware find_hardware(std::string_view id, const std::string& profile_path) {
  const std::string key = lower(id);
  if (key == "this" || key == "this-machine" || key == "local")
    return hardware_from_profile(load_hw_profile(profile_path), profile_path);
  std::string ids;
  for (const Hardware& h : hardware_catalog()) {
    if (h.id == key || std::find(h.aliases.begin(), h.aliases.end(), key) != h.aliases.end()) return h;
    ids += h.id + ", ";
  }
  throw Error("unknown hardware '" + std::string(id) + "' (expected one of: " + ids + "this)");
}

}  // namespace kvlab::perf

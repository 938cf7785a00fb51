// The hardware catalog: peak dense compute per precision, memory bandwidth and
// memory size, each entry with the document it comes from. NVIDIA datasheets
// print tensor-core figures "with sparsity" (2:4 structured, marked *); every
// figure here is dense, and entries say when it was obtained by halving.
// An unknown precision is absent (std::nullopt), never guessed.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lab/hardware/formats.h"
#include "lab/hardware/hw_profile.h"

namespace kvlab::perf {

enum class HwKind { Gpu, AppleSoc, Cpu };
std::string_view hw_kind_name(HwKind k);

// The memory a device streams its weights from. Each class delivers its own
// fraction of its datasheet bandwidth, and each goes with one kind of
// compute (HBM: datacenter tensor cores; GDDR: Ada/Ampere GeForce-class dies;
// LPDDR unified: Apple GPUs; DDR: CPU cores), so `kvlab simulate --validate`
// fits its efficiencies per class (docs/validation/published.md).
enum class MemoryClass { Hbm, Gddr, UnifiedLpddr, Ddr };
std::string_view memory_class_name(MemoryClass c);

struct Hardware {
  std::string id;  // CLI spelling, e.g. "h100"
  std::vector<std::string> aliases;
  std::string name;  // "NVIDIA H100 SXM5 80GB"
  HwKind kind = HwKind::Gpu;
  // Peak dense throughput, FLOP/s (op/s for int8).
  std::optional<double> fp32{}, tf32{}, bf16{}, fp16{}, fp8{}, int8{};
  double mem_bw = 0;           // bytes/s, peak
  double mem_bytes = 0;        // bytes of device (or unified) memory
  std::string memory;          // "80 GB HBM3"
  MemoryClass memory_class = MemoryClass::Hbm;
  std::string source;          // document the figures come from
  std::string compute_note;    // how the dense figures were obtained
  bool sparse_halved = false;  // true when the datasheet's figure was 2:4-sparse and is halved here
  // The device-to-device link (lab/hardware/interconnect.h) a group of these
  // uses by default: NVLink for SXM parts, PCIe for cards without it; empty
  // where the catalog has none (Apple SoCs, CPUs).
  std::string link{};
  // kvlab's own kernels timed on this hardware ("this", from a probe that
  // timed them): the simulator's efficiencies come from them
  // (perf::efficiency_for). Absent for catalog entries.
  std::optional<KernelRates> kernels{};
  // Read bandwidth by working-set size ("this", from a probe that measured
  // it): a pass whose weights and KV fit in the caches reads them faster
  // than mem_bw (perf::cache_speedup). Empty for catalog entries.
  std::vector<SizedBandwidth> read_bw_by_size{};

  std::optional<double> peak(Precision p) const;
  // The peak for `wanted`, falling back to the next wider precision the
  // hardware has (fp8 -> bf16 -> fp32; fp16 -> bf16 -> fp32; int8 -> bf16 ->
  // fp32; tf32 -> fp32).
  // `used` receives the precision that was actually priced.
  double compute_peak(Precision wanted, Precision* used) const;
};

std::span<const Hardware> hardware_catalog();

// "this" (or "this-machine", "local") builds the entry from the probe profile
// at `profile_path`; anything else is a catalog id or alias (case-insensitive).
// Throws kvlab::Error listing the ids.
Hardware find_hardware(std::string_view id, const std::string& profile_path = default_hw_profile_path());

// "this machine" from a probe profile: fp32 and int8 peaks as measured, the
// best measured read bandwidth, installed RAM.
Hardware hardware_from_profile(const HwProfile& p, std::string_view origin);

}  // namespace kvlab::perf

// What each device of a tensor/pipeline-parallel layout holds (weights, KV
// cache, activations) against what it has, and, when a model does not fit,
// the smallest layout or weight format that does (docs/perf-model.md,
// section 7).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lab/simulate/layout.h"
#include "model/config.h"

namespace kvlab::perf {

// vLLM's default gpu_memory_utilization: the fraction of a device's memory
// an engine plans for weights, KV cache and activations; the rest goes to the
// runtime (CUDA context, communication buffers, allocator slack).
inline constexpr double kUsableMemoryFraction = 0.9;

// What the busiest device of a layout holds.
struct DeviceMemory {
  double weights = 0;      // its layers' share of the shard, plus the embedding or the LM head
  double kv = 0;           // its layers' KV heads for every sequence at `positions`
  double activations = 0;  // the largest pass's live activations and logits
  double usable = 0;       // device memory x kUsableMemoryFraction
  double total() const { return weights + kv + activations; }
  bool fits() const { return total() <= usable; }
};

struct MemoryShape {
  double weight_bytes = 2;  // per parameter of the matrices
  double kv_bytes = 2;      // per cached element
  double act_bytes = 2;     // per activation element
  int64_t positions = 0;    // per sequence, at the end of the run
  int64_t batch = 1;
  int64_t pass_tokens = 1;  // tokens of the largest pass per sequence (the prefill)
};

DeviceMemory device_memory(const model::Config& c, const Layout& l, const MemoryShape& s, double device_mem_bytes);

// When the layout asked for does not fit: the smallest tensor-parallel group
// (1, 2, 4, 8 devices per stage, the pp asked for) that fits in the weight
// format asked for, or, if even 8 does not, the widest narrower weight format
// (fp8 ... q4_0) that fits and its smallest group. nullopt when nothing does.
struct FitSuggestion {
  int tp = 1;
  std::string weights;  // format name
  DeviceMemory memory;
};
inline constexpr int kMaxSuggestedTp = 8;  // the GPUs of one NVLink/PCIe node
std::optional<FitSuggestion> smallest_fit(const model::Config& c, const Layout& asked, const MemoryShape& s,
                                          std::string_view weights, double device_mem_bytes);

}  // namespace kvlab::perf

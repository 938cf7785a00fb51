// kvlab diagnose: from a user's metrics (TTFT, decode tok/s) to which phase
// struggles, why (the roofline of each phase, MFU for prefill, MBU for
// decode), which hardware upgrade helps, and which software remedies help most.
//
// The struggling phase is the one that misses its target by the larger
// factor (defaults: TTFT 1 s, Nielsen's limit for an uninterrupted flow of
// thought; 10 tok/s, about twice human reading speed). The roofline then says
// which resource bounds that phase, so which upgrade can help.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/phase.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/roofline.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/simulate.h"
#include "model/config.h"

namespace kvlab::perf {

struct Observation {
  double ttft_s = 0.050;      // the seed's case: 50 ms ...
  double decode_tok_s = 2.0;  // ... and 2 tokens/s
  int64_t prompt_tokens = 512;
  int64_t gen_tokens = 128;  // tokens decoded; sets the no-cache step size
  bool kv_cache = true;
};

// A `kvlab run --json` object: ttft_ms, decode_tok_s, prompt_tokens, and
// optionally tokens (array), kv_cache (bool), model (path). Throws kvlab::Error.
struct RunRecord {
  Observation obs;
  std::string model;  // empty when absent
};
RunRecord parse_run_json(std::string_view json_text, std::string_view origin);

struct DiagnoseOptions {
  Observation obs;
  std::string model_id = "llama-3.1-8b";
  model::Config model;
  std::string weights = "bf16";
  std::optional<double> weight_bits;  // a GGUF file's own average, when known
  std::string kv = "f16";
  std::optional<Hardware> hw;  // the user's hardware, when known
  // The devices of `hw` the model was split over (tensor x pipeline
  // parallel); one by default. Catalog devices are priced with the same
  // split over their own links.
  Layout layout;
  Efficiency eff;              // for catalog hardware, and for `hw` unless hw_eff is set
  std::optional<Efficiency> hw_eff;  // for `hw` alone (a probed "this": what kvlab's kernels reach)
  double target_ttft_s = 1.0;
  double target_tok_s = 10.0;
};

// A diagnosis names Prefill or Decode; Recompute is a step of a no-cache run,
// which it does not model.
using engine::Phase;
enum class Resource { MemoryBandwidth, Compute };
std::string_view resource_name(Resource r);  // "memory bandwidth", "compute (FLOP/s)"

struct PhaseReport {
  double seconds = 0;                 // measured: TTFT, or 1 / decode tok/s
  double flops = 0;                   // of the pass (perf::Cost)
  double bytes = 0;                   // weights + KV of the pass
  double intensity = 0;               // FLOP/byte
  double achieved_flops = 0;          // flops / seconds
  double achieved_bw = 0;             // bytes / seconds
  std::optional<Verdict> on_hw;       // against the hardware's datasheet peaks: MFU, MBU
  std::optional<double> predicted_s;  // the simulator on the hardware
  Bound bound = Bound::Memory;
  std::string bound_basis;  // which ridge point decided the bound
  double target_miss = 0;   // measured / target time; > 1 misses the target
};

struct HwOption {
  std::string id, name;
  HwKind kind = HwKind::Gpu;
  double mem_bw = 0;
  double ttft_s = 0, decode_tok_s = 0;
  double prefill_gain = 0, decode_gain = 0;  // against the measurement
  bool fits = false;
};

struct Remedy {
  std::string name;
  double gain = 1;  // predicted speed-up of the struggling phase
  std::string detail;
  // The gain is in aggregate throughput over several streams (batching);
  // ranked after the remedies that speed up the user's own stream.
  bool aggregate = false;
};

struct Contradiction {
  std::string finding;
  std::vector<std::string> explanations;
};

struct Diagnosis {
  DiagnoseOptions in;
  double weight_bits = 0;
  double weight_bytes = 0;
  PhaseReport prefill, decode;
  Phase struggling = Phase::Decode;
  bool misses_target = true;  // false: both phases meet their targets
  Resource limiting = Resource::MemoryBandwidth;
  std::string cause;
  std::string upgrade;       // the hardware upgrade that helps, in words
  double gain_2x_flops = 1;  // struggling phase, on the reference machine
  double gain_2x_bandwidth = 1;
  std::string reference;           // what the reference machine is
  std::vector<HwOption> hardware;  // catalog, best for the struggling phase first
  std::vector<Remedy> remedies;    // best first
  std::vector<Contradiction> contradictions;
};

// Throws kvlab::Error for non-positive metrics.
Diagnosis diagnose(const DiagnoseOptions& in);

}  // namespace kvlab::perf

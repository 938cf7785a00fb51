// The analytical simulator: the time of every forward pass of a generation,
// with and without the KV cache, on catalog hardware, from perf::Cost and a
// roofline with explicit efficiencies:
//
//   t(pass) = max(FLOPs / (peak_flops · eff_compute),
//                 bytes / (peak_bw · eff_bandwidth)) + n_layer · layer_overhead
//
// where bytes = weights + KV (perf::Cost::dram_bytes()). The defaults and why
// they are what they are: docs/perf-model.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "perf/cost.h"
#include "perf/formats.h"
#include "perf/hardware.h"
#include "perf/roofline.h"

namespace kvlab::perf {

struct Efficiency {
  // Fraction of peak DRAM bandwidth a streaming read achieves (gpt-fast
  // measured ~1700 of 2039 GB/s on A100; STREAM-class results sit at 80-90%).
  double bandwidth = 0.8;
  // Fraction of dense peak FLOP/s the whole forward pass sustains when it is
  // compute-bound: large GEMMs reach 70-80%, attention, norms and small GEMMs
  // pull the average down.
  double compute = 0.6;
  // Fixed cost per layer per pass: ~15 kernels (or thread-pool barriers) per
  // layer x ~2 us of launch, ramp-up and tail each.
  double layer_overhead_s = 30e-6;
};

// The hardware after efficiencies: what the time model divides by.
struct Machine {
  double peak_flops = 0;        // datasheet peak for the precision priced
  double peak_bytes_per_s = 0;  // datasheet bandwidth
  double flops = 0;             // peak_flops · eff.compute
  double bytes_per_s = 0;       // peak_bytes_per_s · eff.bandwidth
  double layer_overhead_s = 0;
  Precision precision = Precision::BF16;
};
Machine make_machine(const Hardware& hw, Precision wanted, const Efficiency& eff);

struct PassTime {
  double flops = 0;
  double bytes = 0;       // weights + KV
  double compute_s = 0;   // flops / machine.flops
  double memory_s = 0;    // bytes / machine.bytes_per_s
  double overhead_s = 0;  // n_layer · layer_overhead
  double seconds = 0;     // max(compute_s, memory_s) + overhead_s
  Bound bound = Bound::Memory;
};
PassTime time_pass(const model::Config& c, const Pass& p, const Machine& m);

// First position p (0-based index of the token fed) at which a no-KV-cache
// decode step (T = p + 1, P = 0) is compute-bound on `m`; nullopt when it
// stays memory-bound up to 2^26 positions. `shape` supplies the dtypes and
// batch; its token counts are ignored.
std::optional<int64_t> nocache_crossover(const model::Config& c, const Pass& shape, const Machine& m);

struct SimOptions {
  int64_t prompt = 512;  // tokens in the prompt (prefill)
  int64_t gen = 2048;    // decode steps after the prefill
  int64_t batch = 1;     // sequences decoded together
  std::string weights = "bf16";
  std::string kv = "f16";
  // Average bits per weight when known better than the format's nominal
  // figure (a GGUF file's size); the format still sets the compute precision.
  std::optional<double> weight_bits;
  std::optional<Precision> compute;  // override the weight format's precision
  Efficiency eff;
  bool with_cache = true;
  bool without_cache = true;
};

struct Step {
  int64_t position = 0;  // index of the token fed (prompt + i for step i)
  PassTime cached;       // T = 1, P = position
  PassTime naive;        // T = position + 1, P = 0
};

struct Simulation {
  std::string model_id;
  model::Config model;
  Hardware hw;
  SimOptions opt;
  double weight_bits = 0;  // bits per weight priced
  double kv_bits = 0;
  Machine machine;
  PassTime prefill;                  // TTFT = prefill.seconds
  std::vector<Step> steps;           // one per decode step
  double total_cached_s = 0;         // prefill + every cached step
  double total_naive_s = 0;          // prefill + every no-cache step
  double weight_bytes = 0;           // resident weights
  double kv_bytes_per_token = 0;     // per sequence
  double kv_bytes_final = 0;         // all sequences at prompt + gen positions
  bool fits = false;                 // weights + KV within hw.mem_bytes
  std::optional<int64_t> crossover;  // see nocache_crossover()
};

// Throws kvlab::Error for out-of-range options.
Simulation simulate(const std::string& model_id, const model::Config& model, const Hardware& hw, const SimOptions& opt);

}  // namespace kvlab::perf

// The analytical simulator: the time of every forward pass of a generation,
// with and without the KV cache, on catalog hardware, from perf::Cost and a
// roofline with explicit efficiencies, one roofline per kernel (or group of
// kernels) that runs after the one before:
//
//   t(pass) = sum over matmul jobs j (perf::matmul_jobs) of
//               max(compute_j, memory_j)                      on a GPU,
//               memory_j + compute_j · (tokens_j - 1) / tokens_j   on a CPU,
//             compute_j = FLOPs_j / (peak · eff_compute) + tokens_j · (calls_j · cols_j · input_s + rows_j · output_s),
//             memory_j  = weight bytes_j / (peak_bw · eff_bandwidth) + rows_j · row_s + calls_j · call_s
//           + max(element-wise FLOPs / (fp32 peak · eff_elementwise),
//                 other weight bytes (embedding rows, norm gains) / (peak_bw · eff_bandwidth))
//           + max(attention FLOPs / (attention peak · eff_attention) · tail,
//                 KV bytes / (peak_bw · eff_bandwidth))
//           + n_layer · layer_overhead
//
// The "dense" time is the first two lines: matmuls, norms, RoPE, SiLU,
// residuals, with the weights; attention over the context (scores, softmax,
// the weighted sum of V) carries the KV cache traffic. eff_attention is the
// one-token (decode) figure for passes of one token per sequence. `tail` is the
// slowest thread's share of the (token, head) tasks of an engine that splits
// attention that way (1 where the thread count is unknown). The defaults and
// why they are what they are, and where "this" machine's efficiencies come
// from: docs/perf-model.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lab/cost/cost.h"
#include "lab/hardware/formats.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/roofline.h"
#include "lab/simulate/device_memory.h"
#include "lab/simulate/layout.h"
#include "model/config.h"

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
  // Fraction of its precision's peak the attention kernels sustain, over many
  // tokens (prefill) and for one token per sequence (decode); unset:
  // `compute` (fused attention kernels run on the same units as the GEMMs)
  // and `attention` respectively.
  std::optional<double> attention{}, attention_decode{};
  // Fixed seconds per (token, KV head) attention task of a many-token pass,
  // on top of its FLOPs (a short context pays it on few of them); 0 unless
  // measured.
  double attention_task_s = 0;
  // Fraction of the fp32 peak the element-wise ops (norms, RoPE, SiLU·up,
  // residual adds) sustain; unset: `compute`.
  std::optional<double> elementwise{};
  // Fixed seconds per weight row and per matmul call of a memory-bound
  // matmul, on top of its bytes (a row's reduction and store, a new stream;
  // waking the pool, the first and the last tiles); 0 unless measured.
  double row_s = 0, call_s = 0;
  // Fixed seconds per token of a compute-bound matmul's input column
  // (converted once per call) and of its output row (scaled and stored), on
  // top of its FLOPs (a small matrix pays them on few); 0 unless measured.
  double matmul_input_s = 0, matmul_output_s = 0;
  // Threads the engine splits attention over, one task per (token, head);
  // 0: unknown, no tail.
  int threads = 0;
  // The working set `bandwidth` was measured over (kvlab probe's decode
  // matmuls stream a buffer of max(128 MiB, 2 x L3)); a pass's bytes are
  // priced by the read curve relative to it (Machine::read_speedup).
  // 0: a DRAM-sized working set, the curve's last point.
  double bandwidth_working_set_bytes = 0;
  std::string source = "defaults";  // where these figures come from, for reports

  double attention_or_compute() const { return attention.value_or(compute); }
  double attention_decode_or_attention() const { return attention_decode.value_or(attention_or_compute()); }
  double elementwise_or_compute() const { return elementwise.value_or(compute); }
};

// The efficiencies to price `hw` with. For a machine whose kernels kvlab probe
// timed (Hardware::kernels: "this" after a probe) and a `weights` format it
// timed, they are the measured rates over the hardware's peaks:
//   bandwidth  = one-token matmul bytes/s / best read bandwidth
//   row_s, call_s = its fixed costs per weight row and per call
//   compute    = 512-token matmul op/s / peak of dense_precision()
//   matmul_input_s, matmul_output_s = its fixed costs per token of an input column, an output row
//   attention, attention_decode = attention FLOP/s, many-token and one-token shapes (this KV
//                format, nearest head width) / peak of the KV format's precision
//   attention_task_s = the many-token shape's fixed cost per (token, KV head)
//   elementwise = element-wise FLOP/s / fp32 peak
//   threads    = the pool size they were measured with
//   layer_overhead = thread-pool job cost x the 6 element-wise jobs of a kvlab layer
// Otherwise the defaults above. Fractions above 1 (a measurement above a
// peak measured at another moment) are capped at 1.
Efficiency efficiency_for(const Hardware& hw, std::string_view weights, std::string_view kv, const model::Config& c);

// The precision the matmuls of `weights` are priced at on `hw`: the format's
// (lab/hardware/formats.h), except integer weights on a CPU with an int8 peak, which
// CPU engines (kvlab, llama.cpp) multiply by 8-bit-quantized activations with
// integer dot products.
Precision dense_precision(const Hardware& hw, const NumberFormat& weights);

// The hardware after efficiencies: what the time model divides by.
struct Machine {
  double peak_flops = 0;        // datasheet peak for the precision priced
  double peak_bytes_per_s = 0;  // datasheet bandwidth
  double flops = 0;             // peak_flops · eff.compute
  double bytes_per_s = 0;       // peak_bytes_per_s · eff.bandwidth
  double layer_overhead_s = 0;
  double row_s = 0;             // eff.row_s
  double call_s = 0;            // eff.call_s
  double matmul_input_s = 0;    // eff.matmul_input_s
  double matmul_output_s = 0;   // eff.matmul_output_s
  // A GPU's matmul takes the larger of its read and its arithmetic; a
  // CPU's (kvlab's kernels) the read plus each further token's arithmetic
  // at the 512-token rate (an empirical fit: docs/perf-model.md).
  bool reads_hide_arithmetic = true;
  Precision precision = Precision::BF16;
  // Attention over the context, priced at its own precision and efficiency,
  // and the element-wise ops at fp32 (0: at `flops`).
  double attention_peak_flops = 0;
  double attention_flops = 0;         // attention_peak_flops · eff.attention
  double attention_decode_flops = 0;  // attention_peak_flops · eff.attention_decode
  double attention_task_s = 0;        // eff.attention_task_s
  Precision attention_precision = Precision::BF16;
  double elementwise_flops = 0;  // fp32 peak · eff.elementwise
  int threads = 0;               // eff.threads
  // Hardware::read_bw_by_size: bytes_per_s applies to a pass whose working
  // set is bandwidth_working_set_bytes (0: beyond the caches).
  std::vector<SizedBandwidth> read_bw_by_size;
  double bandwidth_working_set_bytes = 0;  // eff.bandwidth_working_set_bytes
  // How much faster than bytes_per_s a pass reading `bytes` once is read:
  // the curve's rate at that size over its rate at the size bytes_per_s was
  // measured at (below 1 for a pass larger than that, where the curve
  // falls).
  double read_speedup(double bytes) const;
  double attention_rate() const { return attention_flops > 0 ? attention_flops : flops; }
  double attention_decode_rate() const { return attention_decode_flops > 0 ? attention_decode_flops : attention_rate(); }
  double elementwise_rate() const { return elementwise_flops > 0 ? elementwise_flops : flops; }
};
// `attention`: the precision attention runs in (the KV format's); unset: `wanted`.
Machine make_machine(const Hardware& hw, Precision wanted, const Efficiency& eff,
                     std::optional<Precision> attention = std::nullopt);

struct PassTime {
  double flops = 0;
  double bytes = 0;        // weights + KV
  double compute_s = 0;    // the compute terms of both groups
  double memory_s = 0;     // bytes / machine.bytes_per_s + rows · row_s + matmuls · call_s + small-batch tokens
  double dense_s = 0;      // the matmul jobs' and element-wise ops' roofline times
  double attention_s = 0;  // the attention group's
  double overhead_s = 0;   // n_layer · layer_overhead
  double comm_s = 0;       // on the links between devices (lab/simulate/parallel.h); 0 on one device
  double seconds = 0;      // dense_s + attention_s + overhead_s + comm_s
  // Compute when compute_s >= memory_s: the roof the pass spends most time
  // under (with one FLOP rate for both groups, the plain roofline verdict).
  Bound bound = Bound::Memory;
};
PassTime time_pass(const model::Config& c, const Pass& p, const Machine& m);
// What time_pass needs of a pass besides its Cost: how its attention splits
// into the engine's tasks.
struct AttentionShape {
  double tokens = 1;      // new tokens of all sequences: one (token, KV head) task each per layer
  int64_t context = 1;    // positions the longest sequence attends over (past + new)
  bool one_token = true;  // every sequence feeds one token: priced at the decode rates
};
// time_pass on a Cost built by the caller (the serving simulator's passes
// mix decode rows and prefill chunks: lab/simulate/serve_pass.h).
PassTime time_cost(const model::Config& c, const Cost& cost, const AttentionShape& a, const Machine& m);

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
  // Devices the model is split over (tensor x pipeline parallel) and the link
  // between them; one device by default. Every pass is one device's shard
  // plus the link's time (lab/simulate/parallel.h).
  Layout layout;
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
  DeviceMemory memory;               // what the busiest device holds (lab/simulate/device_memory.h)
  bool fits = false;                 // memory.fits()
  // When it does not fit: the smallest tensor-parallel group, or weight
  // format, that does.
  std::optional<FitSuggestion> suggestion;
  std::optional<int64_t> crossover;  // see nocache_crossover()
};

// Throws kvlab::Error for out-of-range options.
Simulation simulate(const std::string& model_id, const model::Config& model, const Hardware& hw, const SimOptions& opt);

}  // namespace kvlab::perf

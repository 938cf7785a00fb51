// The bytes one cached decode step of the default model reads, and nothing
// else: a step's memory floor at a given depth, on this machine, now.
//
//   step_reads/depth:<16|256|1024|2048>/threads:2
//
// Per layer, in the engine's order and as the engine's jobs split them (each
// thread reads its half of every job, and the threads meet between jobs on
// the same ThreadPool): q, k and v's matrices; the layer's f16 K and V rows
// at the depth; o's matrix; gate's and up's; down's. Then the output matrix.
// Sizes come from the default model (`kvlab info`: the matrices of
// Weights::matmul_bytes less the norm vectors, 22.50 KiB of f16 K/V a
// position). Weights and K/V sit in huge-page memory, as in the engine. Each
// read is the probe's read loop (lab/probe/probe.h), so the rate is what `kvlab
// probe` calls read bandwidth. Iterations follow one another like a
// continuous generation's steps.
//
// Why: issue 3 asks for a cached step at position 2048 within 1.5x the step
// at 16. On bytes alone the default model's ratio is 1.48, but a step at 16
// reads a working set that a large L3 can hold, and one at 2048 adds 45 MiB
// of K/V to it. The ratio of this benchmark's times at depth 2048 and 16,
// from one run, is the ratio a decode step that only read its bytes would
// show here, to set beside bench/quadratic-trap's.
//
// Counters, besides the whole step's bytes/s: the weight jobs' rate
// (weights_GB/s) and the K/V jobs' (kv_GB/s), each over its own jobs' wall
// time. If the L3 held part of the weights from one step to the next at 16
// and the K/V took part of it at 2048, the weights' rate would fall with the
// depth while the K/V read faster than DRAM, the whole step's rate staying.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/huge_buffer.h"
#include "kernels/thread_pool.h"
#include "lab/cost/cost.h"
#include "lab/probe/probe.h"
#include "micro_common.h"
#include "model/model.h"

namespace kvlab::bench {
namespace {

constexpr int kMaxDepth = 2048;
// read_sum takes multiples of 512 bytes: each job is padded to 1024, so
// each thread's half is whole.
constexpr size_t kPad = 1024;

size_t padded(size_t bytes) { return (bytes + kPad - 1) / kPad * kPad; }

// One job of a step: a run of weight bytes, or a layer's K and V rows at the
// depth (their bytes depend on it).
struct Job {
  bool kv;
  size_t weight_bytes;  // padded; 0 for a K/V job
};
struct StepJobs {
  std::vector<Job> jobs;       // in the engine's order
  size_t n_layer = 0;
  size_t kv_per_position = 0;  // f16 K and V, one layer
  size_t weight_bytes = 0;     // the weight jobs' sum
};

const StepJobs* default_step() {
  static std::unique_ptr<StepJobs> step;
  if (step) return step.get();
  const std::string path = default_model_path();
  if (!std::filesystem::exists(path)) return nullptr;
  const std::unique_ptr<model::Model> m = model::Model::load(path);
  const model::Weights& w = m->weights();
  step = std::make_unique<StepJobs>();
  auto weights = [&](size_t bytes) {
    step->jobs.push_back({false, padded(bytes)});
    step->weight_bytes += padded(bytes);
  };
  for (const model::LayerWeights& l : w.layers) {
    weights(l.wq.bytes() + l.wk.bytes() + l.wv.bytes());
    step->jobs.push_back({true, 0});
    weights(l.wo.bytes());
    weights(l.w_gate.bytes() + l.w_up.bytes());
    weights(l.w_down.bytes());
  }
  weights(w.output.bytes());
  step->n_layer = w.layers.size();
  // f16: 2 bytes an element; perf::kv_bytes_per_token counts every layer.
  step->kv_per_position = size_t(perf::kv_bytes_per_token(m->config(), 2.0)) / step->n_layer;
  return step.get();
}

void BM_step_reads(benchmark::State& state, int depth, int threads) {
  use_best_isa();
  const StepJobs* step = default_step();
  if (!step) {
    state.SkipWithError("models/SmolLM2-135M-Instruct.Q4_1.gguf not found (scripts/setup.sh fetches it)");
    return;
  }
  const size_t kv_slot = padded(step->kv_per_position * kMaxDepth);
  const size_t kv_read = padded(step->kv_per_position * size_t(depth));
  HugeBuffer weights(step->weight_bytes), kv(step->n_layer * kv_slot);
  std::memset(weights.data(), 1, weights.size());
  std::memset(kv.data(), 2, kv.size());
  const auto& read = perf::probe_kernels::for_active_isa().read_sum;
  kernels::ThreadPool pool(threads);
  std::vector<uint64_t> sink(size_t(threads) * 8);  // a cache line per thread
  auto job = [&](const uint8_t* p, size_t bytes) {
    pool.run(size_t(threads), [&](size_t t, int thread) {
      const size_t part = bytes / size_t(threads) / 512 * 512;  // whole 512s; the last thread takes the rest
      const size_t a = t * part, b = t + 1 == size_t(threads) ? bytes : a + part;
      sink[size_t(thread) * 8] += read(p + a, b - a);
    });
  };
  using Clock = std::chrono::steady_clock;
  Clock::duration in_weights{}, in_kv{};
  for (auto _ : state) {
    const uint8_t* wp = weights.data();
    size_t layer = 0;
    for (const Job& j : step->jobs) {
      const Clock::time_point t0 = Clock::now();
      if (j.kv) {
        job(kv.data() + layer++ * kv_slot, kv_read);
      } else {
        job(wp, j.weight_bytes);
        wp += j.weight_bytes;
      }
      (j.kv ? in_kv : in_weights) += Clock::now() - t0;
    }
  }
  benchmark::DoNotOptimize(sink.data());
  const double steps = double(state.iterations());
  state.counters["bytes/s"] = rate(double(step->weight_bytes + step->n_layer * kv_read));
  auto gb_per_s = [&](double bytes_per_step, Clock::duration spent) {
    return bytes_per_step * steps / std::chrono::duration<double>(spent).count() * 1e-9;
  };
  state.counters["weights_GB/s"] = gb_per_s(double(step->weight_bytes), in_weights);
  state.counters["kv_GB/s"] = gb_per_s(double(step->n_layer * kv_read), in_kv);
}

int register_all() {
  for (int depth : {16, 256, 1024, kMaxDepth}) {
    const std::string name = "step_reads/depth:" + std::to_string(depth) + "/threads:2";
    benchmark::RegisterBenchmark(name.c_str(), BM_step_reads, depth, 2)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench

// `kvlab probe`: measures this machine's limits and fills a HwProfile
// (lab/hardware/hw_profile.h), the "this" hardware entry of the simulator and the
// roofline `kvlab bench` places its runs on. The method is in docs/probe.md:
//
//  - memory read bandwidth: a read-only streaming sum (wide loads, several
//    accumulators) over a buffer far larger than the last-level cache,
//    touched first, split into one contiguous slice per thread, for each
//    thread count; several passes, each timed in windows of 2 x L3, the best
//    window kept, bytes/s;
//  - peak FP32: a register-resident FMA loop with independent accumulators
//    (2 FLOP per lane per FMA), on 1 thread and on all threads together;
//  - peak int8: the instruction the quantized kernels use on the active ISA
//    (AVX2: vpmaddubsw + vpmaddwd; AVX-512 VNNI: vpdpbusd), 2 op (multiply,
//    add) per int8 multiply-add;
//  - caches from sysfs (fallback: sysconf), cores from sysfs topology, the
//    CPU brand string, installed memory from /proc/meminfo;
//  - kvlab's own matmul and attention kernels and thread pool, on all
//    threads (measure_engine_kernels): what the simulator's efficiencies for
//    "this" machine are computed from.
//
// The per-ISA loops live in probe_scalar.cpp, probe_avx2.cpp and
// probe_avx512.cpp (compiled with their own target flags, chosen at run time
// from kernels::active_isa()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lab/hardware/hw_profile.h"

namespace kvlab::perf {

inline constexpr const char* kSysfsCpuRoot = "/sys/devices/system/cpu";

struct CacheSizes {
  uint64_t l1d_bytes = 0;  // per core
  uint64_t l2_bytes = 0;   // per core
  uint64_t l3_bytes = 0;   // every L3 instance of cpu0's package, summed
};

// "32K", "512K", "32768K", "1M", "1024" (bytes) -> bytes; 0 when unreadable.
uint64_t parse_cache_size(std::string_view text);

// Caches from <cpu_root>/cpu0/cache/index*/{level,type,size}; L3 instances
// are told apart by shared_cpu_list across <cpu_root>/cpu*/ (limited to cpu0's
// physical package). Levels not found are 0.
CacheSizes read_sysfs_caches(const std::string& cpu_root = kSysfsCpuRoot);
// read_sysfs_caches, with sysconf(_SC_LEVEL*_CACHE_SIZE) for any level it
// could not find.
CacheSizes detect_caches(const std::string& cpu_root = kSysfsCpuRoot);

// Physical cores: distinct (physical_package_id, core_id) pairs under
// <cpu_root>/cpu*/topology; 0 when the topology is unreadable.
int read_sysfs_cores(const std::string& cpu_root = kSysfsCpuRoot);

struct MemInfo {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable (MemFree on old kernels)
};
MemInfo read_meminfo(const std::string& path = "/proc/meminfo");

struct ProbeOptions {
  bool quick = false;             // smaller buffer, fewer and shorter runs (~2 s)
  int max_threads = 0;            // 0: every hardware thread
  uint64_t bw_buffer_bytes = 0;   // 0: max(1 GiB, 4 x L3) (quick: max(256 MiB, 4 x L3)),
                                  //    capped at half the available memory
  int bw_passes = 0;              // passes per thread count, the best kept; 0: 8 (quick: 3)
  double compute_run_s = 0;       // length of one timed compute run; 0: 5 ms
  int compute_runs = 0;           // timed compute runs, the best kept; 0: 100 (quick: 30)
  std::string cpu_root = kSysfsCpuRoot;
  std::string meminfo_path = "/proc/meminfo";
  // Called with one line (no newline) as each step starts and ends; may be empty.
  std::function<void(const std::string&)> progress;
};

struct ProbeResult {
  HwProfile profile;
  uint64_t bw_buffer_bytes = 0;  // size of the streaming buffer actually used
  uint64_t bw_window_bytes = 0;  // bytes per timed window (all threads together)
  double fp32_flops_1t = 0;      // one thread
  double int8_ops_1t = 0;
  std::string fp32_method;       // e.g. "vfmadd231ps ymm, 12 accumulators"
  std::string int8_method;       // e.g. "vpmaddubsw + vpmaddwd ymm"
  double seconds = 0;            // wall time of the whole probe
  std::vector<std::string> notes;  // caveats found while probing (buffer capped, ...)
};

// The thread counts bandwidth is measured at: every count 1..n when n <= 16;
// on bigger machines 1..8, then a geometric ladder (x1.25) that ends at n,
// plus `cores` (the physical core count).
std::vector<int> bandwidth_thread_counts(int n, int cores);

// Runs every measurement (seconds; progress through opt.progress).
ProbeResult run_probe(const ProbeOptions& opt = {});

// kvlab's own kernels on a `threads`-thread pool (probe_engine.cpp): the
// matmul of every weight dtype, decode-shaped (one token, weights streamed
// from a buffer of `stream_bytes`, which should be several times the L3) and
// prefill-shaped (512 tokens, weights in cache); attention per KV dtype and
// head width; the thread pool's cost per job. Best of a few runs each.
KernelRates measure_engine_kernels(int threads, uint64_t stream_bytes, bool quick,
                                   const std::function<void(const std::string&)>& progress);

// Fails early, on one line, when `path` cannot receive the profile: creates
// its parent directories and checks that a file can be created next to it.
// Throws kvlab::Error.
void check_profile_path(const std::string& path);
// Writes the JSON to `path` atomically (a temporary file in the same
// directory, then rename); creates parent directories. Throws kvlab::Error.
void write_hw_profile(const HwProfile& p, const std::string& path);

// Readable report (markdown tables): machine, read bandwidth per thread count,
// peaks and ridge points (peak / best read bandwidth, FLOP or op per byte).
// `measured` adds what only a fresh probe knows (1-thread peaks, methods,
// notes, duration); `path` is where the profile is stored (may be empty).
std::string render_hw_profile_md(const HwProfile& p, const ProbeResult* measured, const std::string& path);

// Current time, ISO 8601 UTC ("2025-06-01T12:00:00Z").
std::string iso_utc_now();

// The per-ISA loops (probe_<isa>.cpp). Every function returns a value that
// depends on all the work done, so the compiler cannot drop any of it.
namespace probe_kernels {

struct Kernels {
  const char* isa;
  // Sum of the 64-bit words of [p, p + bytes); p 64-byte aligned, bytes a
  // multiple of 512.
  uint64_t (*read_sum)(const void* p, size_t bytes);
  // `iters` iterations of the FP32 FMA loop, fp32_flops_per_iter FLOP each.
  double (*fp32)(uint64_t iters);
  double fp32_flops_per_iter;
  const char* fp32_method;
  // `iters` iterations of the int8 dot loop, int8_ops_per_iter op each.
  double (*int8)(uint64_t iters);
  double int8_ops_per_iter;
  const char* int8_method;
};

const Kernels& scalar();
const Kernels& avx2();
const Kernels& avx512();  // int8: vpdpbusd
const Kernels& amx();     // avx512's, int8: tdpbsud

// The set for kernels::active_isa().
const Kernels& for_active_isa();

}  // namespace probe_kernels

}  // namespace kvlab::perf

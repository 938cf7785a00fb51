// `kvlab probe`: orchestration (buffer, threads, timing, best-of), machine
// description from sysfs and /proc, and the profile file. The loops that are
// timed are in probe_<isa>.cpp; the method is documented in docs/probe.md.
#include "lab/probe/probe.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"
#include "lab/report/units.h"

namespace kvlab::perf {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = uint64_t(1) << 20, kGiB = uint64_t(1) << 30;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Results of the timed loops end up here, so no loop can be optimized away.
std::atomic<double> g_sink{0};
void sink(double v) { g_sink.fetch_add(v, std::memory_order_relaxed); }

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  return s;
}

bool is_cpu_dir(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  if (name.size() < 4 || name.compare(0, 3, "cpu") != 0) return false;
  return std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<fs::path> cpu_dirs(const std::string& root) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (is_cpu_dir(*it)) dirs.push_back(it->path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

struct CacheEntry {
  int level = 0;
  std::string type, shared;
  uint64_t bytes = 0;
};

std::vector<CacheEntry> cache_entries(const fs::path& cpu_dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  for (fs::directory_iterator it(cpu_dir / "cache", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, 5, "index") != 0) continue;
    CacheEntry c;
    c.level = std::atoi(read_text(it->path() / "level").c_str());
    c.type = read_text(it->path() / "type");
    c.shared = read_text(it->path() / "shared_cpu_list");
    c.bytes = parse_cache_size(read_text(it->path() / "size"));
    if (c.level > 0 && c.bytes > 0) out.push_back(c);
  }
  return out;
}

uint64_t sysconf_bytes(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? uint64_t(v) : 0;
}

// A buffer of whole pages from mmap. No huge-page hint: one sequential
// stream per thread reaches the same bandwidth with 4 KiB or 2 MiB pages,
// while MADV_HUGEPAGE made the first touch about 4x slower (direct
// compaction; `kvlab probe --show` times both).
// The engine's weights do use huge pages (common/huge_buffer.h): a matmul
// reads many rows at once, where TLB misses do cost.
struct Buffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  }
  ~Buffer() {
    if (p) ::munmap(p, bytes);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Runs up to `windows` timed windows on n threads (the caller is thread 0):
// in window w every thread calls body(t, w). A barrier releases all threads
// into each window together and a second one waits for the last. Every thread
// reads the clock itself as it starts and ends, and a window lasts from the
// first start to the last end: a thread that wakes late from the barrier must
// not shorten the window (thread 0 alone would measure too little when the
// others ran before it woke). Stops early, after at least `min_windows`, once
// `max_s` seconds have passed. Returns the seconds of each window run. The
// threads live through all the windows, so thread start-up is never timed.
template <class Body>
std::vector<double> run_windows(int n, int windows, const Body& body, int min_windows = 0,
                                double max_s = 1e300) {
  std::barrier sync(n);
  std::vector<double> secs;
  secs.reserve(size_t(windows));
  std::vector<Clock::time_point> starts(static_cast<size_t>(n)), ends(static_cast<size_t>(n));
  bool stop = false;  // written by thread 0 before a barrier, read by all after it
  const Clock::time_point begin = Clock::now();
  auto worker = [&](int t) {
    for (int w = 0; w < windows; ++w) {
      sync.arrive_and_wait();
      if (stop) break;
      starts[size_t(t)] = Clock::now();
      body(t, w);
      ends[size_t(t)] = Clock::now();
      sync.arrive_and_wait();  // every start and end of this window is visible after it
      if (t == 0) {
        secs.push_back(std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) -
                                                     *std::min_element(starts.begin(), starts.end()))
                           .count());
        stop = w + 1 >= min_windows && seconds_since(begin) > max_s;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(size_t(n - 1));
  for (int t = 1; t < n; ++t) threads.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : threads) th.join();
  return secs;
}

template <class Body>
double run_together(int n, const Body& body) {
  return run_windows(n, 1, [&](int t, int) { body(t); })[0];
}

// [begin, end) of thread t's slice when `bytes` is split among n threads, on
// 4 KiB boundaries (so every slice is a multiple of 512 bytes, as read_sum wants).
std::pair<size_t, size_t> slice(size_t bytes, int n, int t) {
  auto at = [&](int i) { return size_t((unsigned __int128)bytes * unsigned(i) / unsigned(n)) & ~size_t(4095); };
  return {at(t), t + 1 == n ? bytes & ~size_t(4095) : at(t + 1)};
}

std::string thread_word(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

std::string binary_size(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// fmt_flops for integer operations: "1.2 Top/s".
std::string fmt_ops(double ops_per_s) {
  std::string s = fmt_flops(ops_per_s);
  return s.replace(s.find("FLOP/s"), 6, "op/s");
}

struct Progress {
  const std::function<void(const std::string&)>& fn;
  void operator()(const std::string& line) const {
    if (fn) fn(line);
  }
};

// ---- memory read bandwidth -------------------------------------------------

// Each pass reads the whole buffer as a series of windows of `window_bytes`
// (all threads together: each reads its share of the window from its own
// slice), each timed on its own. A window is a few times the L3 and was last
// read a whole pass (>= 4 x L3) earlier, so it comes from DRAM. The figure is
// the best window: on a shared machine some windows run with nobody else on
// the cores or the memory bus, even when no whole pass does. The best whole
// pass is kept beside it as the sustained figure.
std::vector<BandwidthPoint> measure_bandwidth(const probe_kernels::Kernels& k, const Buffer& buf,
                                              uint64_t window_bytes, const std::vector<int>& counts, int passes,
                                              double budget_s, const Progress& progress,
                                              std::vector<std::string>& notes) {
  const Clock::time_point start = Clock::now();
  std::vector<BandwidthPoint> points;
  const char* base = static_cast<const char*>(buf.p);
  for (size_t ci = 0; ci < counts.size(); ++ci) {
    const int n = counts[ci];
    // Over budget (a very large machine, or a slow one): keep the last count.
    if (ci + 1 < counts.size() && seconds_since(start) > budget_s) {
      notes.push_back("bandwidth: time budget reached, skipped " + std::to_string(counts.size() - 1 - ci) +
                      " thread counts below " + std::to_string(counts.back()));
      ci = counts.size() - 2;
      continue;
    }
    // Thread t reads [b, e) of its slice in chunks of `chunk` bytes; chunk j
    // of every thread makes window j.
    const size_t chunk = std::max<size_t>(4096, size_t(window_bytes / uint64_t(n)) & ~size_t(4095));
    size_t per_pass = 1;
    for (int t = 0; t < n; ++t) {
      const auto [b, e] = slice(buf.bytes, n, t);
      per_pass = std::max(per_pass, (e - b + chunk - 1) / chunk);
    }
    auto chunk_of = [&](int t, size_t j) {
      const auto [b, e] = slice(buf.bytes, n, t);
      const size_t lo = std::min(e, b + j * chunk);
      return std::pair<size_t, size_t>{lo, std::min(e, lo + chunk)};
    };
    std::vector<double> window_bytes_read(per_pass, 0);
    double pass_bytes = 0;
    for (size_t j = 0; j < per_pass; ++j)
      for (int t = 0; t < n; ++t) {
        const auto [lo, hi] = chunk_of(t, j);
        window_bytes_read[j] += double(hi - lo);
        pass_bytes += double(hi - lo);
      }
    std::vector<uint64_t> sums(size_t(n), 0);
    // At least 2 passes; no new window after budget / 5 (1.4 s) per count.
    const std::vector<double> secs = run_windows(
        n, int(per_pass) * passes,
        [&](int t, int w) {
          const auto [lo, hi] = chunk_of(t, size_t(w) % per_pass);
          sums[size_t(t)] += k.read_sum(base + lo, hi - lo);
        },
        int(per_pass) * std::min(passes, 2), budget_s / 5);
    for (uint64_t v : sums) sink(double(v));
    double best = 0, best_pass = 0, pass_s = 0;
    for (size_t w = 0; w < secs.size(); ++w) {
      const size_t j = w % per_pass;
      if (secs[w] > 0) best = std::max(best, window_bytes_read[j] / secs[w]);
      pass_s += secs[w];
      if (j + 1 == per_pass) {  // a whole pass ends here
        if (pass_s > 0) best_pass = std::max(best_pass, pass_bytes / pass_s);
        pass_s = 0;
      }
    }
    points.push_back({n, best, best_pass});
    progress("probe: read bandwidth, " + thread_word(n) + ": " + fmt_bandwidth(best) + " (best window; best whole pass " +
             fmt_bandwidth(best_pass) + ")");
  }
  return points;
}

// ---- read bandwidth by working-set size -------------------------------------

// A decode step reads the same bytes (its weights and KV cache) once per
// token, and a working set that fits in the caches comes back from them: with
// a large L3, a 97 MB decode step can run at 1.5x the DRAM figure
// (bench/decode-vs-probe measures it). All threads read the first `size` bytes of the
// buffer again and again, each its own slice; the first pass warms the
// caches and the best of the later ones is kept. Sizes double from twice
// the threads' L2 (the curve starts past the private caches) while below 4 x L3,
// then the whole buffer: the DRAM point the speed-ups are relative to. The
// steepest step of that ladder (the caches' real capacity, which on a VM is
// a share of what sysfs reports) is then halved twice in log(size), so a
// working set near the edge is not priced by a line across the cliff.
std::vector<SizedBandwidth> measure_sized_bandwidth(const probe_kernels::Kernels& k, const Buffer& buf, int n,
                                                    uint64_t l2_bytes, uint64_t l3_bytes, bool quick,
                                                    const Progress& progress) {
  const char* base = static_cast<const char*>(buf.p);
  std::vector<uint64_t> sums(size_t(n), 0);
  auto measure = [&](uint64_t size) {
    const std::vector<double> secs = run_windows(
        n, 64,
        [&](int t, int) {
          const auto [b, e] = slice(size_t(size), n, t);
          sums[size_t(t)] += k.read_sum(base + b, e - b);
        },
        3, quick ? 0.02 : 0.06);
    double best = 0;
    for (size_t w = 1; w < secs.size(); ++w)
      if (secs[w] > 0) best = std::max(best, double(size) / secs[w]);
    return SizedBandwidth{double(size), best};
  };
  std::vector<SizedBandwidth> curve;
  const uint64_t top = l3_bytes ? 4 * l3_bytes : 256 * kMiB;
  for (uint64_t s = std::max<uint64_t>(4 * kMiB, 2 * uint64_t(n) * l2_bytes); s < top && 2 * s <= buf.bytes; s *= 2)
    curve.push_back(measure(s));
  curve.push_back(measure(buf.bytes));
  for (int halving = 0; halving < 2 && curve.size() > 1; ++halving) {
    size_t steep = 0;  // the step with the largest drop (ratio of bandwidths)
    for (size_t i = 1; i + 1 < curve.size(); ++i)
      if (curve[i].bytes_per_s * curve[steep + 1].bytes_per_s > curve[steep].bytes_per_s * curve[i + 1].bytes_per_s)
        steep = i;
    const SizedBandwidth a = curve[steep], b = curve[steep + 1];
    const uint64_t mid = uint64_t(std::sqrt(a.bytes * b.bytes)) & ~(2 * kMiB - 1);
    if (a.bytes_per_s < 1.2 * b.bytes_per_s || !(double(mid) > a.bytes && double(mid) < b.bytes)) break;
    curve.insert(curve.begin() + std::ptrdiff_t(steep + 1), measure(mid));
  }
  for (uint64_t v : sums) sink(double(v));
  std::string line = "probe: read bandwidth by working set, " + thread_word(n) + ":";
  for (const SizedBandwidth& b : curve)
    line += " " + binary_size(uint64_t(b.bytes)) + " " + fmt_bandwidth(b.bytes_per_s) + (&b == &curve.back() ? "" : ",");
  progress(line);
  return curve;
}

// ---- compute peaks ---------------------------------------------------------

struct Peak {
  double one = 0, all = 0;
};

Peak measure_compute(double (*fn)(uint64_t), double ops_per_iter, int n, double run_s, int runs) {
  // Calibrate on one thread (this doubles as the warm-up that lets the core
  // reach its steady clock): grow the count until a run takes >= 20 ms.
  uint64_t iters = 1 << 10;
  double t = 0;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    sink(fn(iters));
    t = seconds_since(t0);
    if (t >= 0.02 || iters >= (uint64_t(1) << 40)) break;
    iters *= t < 0.002 ? 8 : 2;
  }
  const uint64_t run_iters = std::max<uint64_t>(1, uint64_t(double(iters) * run_s / std::max(t, 1e-9)));
  const double ops = ops_per_iter * double(run_iters);
  Peak p;
  // At most ~2 s per figure (a machine so busy that 100 runs of 5 ms take longer).
  const int min_runs = std::min(runs, 5);
  for (double s : run_windows(1, runs, [&](int, int) { sink(fn(run_iters)); }, min_runs, 2.0))
    if (s > 0) p.one = std::max(p.one, ops / s);
  if (n == 1) {
    p.all = p.one;
    return p;
  }
  std::vector<double> results(size_t(n), 0);
  for (double s : run_windows(n, runs, [&](int th, int) { results[size_t(th)] += fn(run_iters); }, min_runs, 2.0))
    if (s > 0) p.all = std::max(p.all, ops * n / s);
  for (double v : results) sink(v);
  return p;
}

}  // namespace

// ---- machine description ---------------------------------------------------

uint64_t parse_cache_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    if (v > (uint64_t(1) << 50)) return 0;
    v = v * 10 + uint64_t(text[i] - '0');
  }
  if (digits == 0) return 0;
  while (i < text.size() && text[i] == ' ') ++i;
  uint64_t mult = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'K': case 'k': mult = uint64_t(1) << 10; break;
      case 'M': case 'm': mult = uint64_t(1) << 20; break;
      case 'G': case 'g': mult = uint64_t(1) << 30; break;
      case 'B': case 'b': break;
      default: return 0;
    }
  }
  return v * mult;
}

CacheSizes read_sysfs_caches(const std::string& cpu_root) {
  CacheSizes c;
  const fs::path cpu0 = fs::path(cpu_root) / "cpu0";
  std::string l3_shared;
  for (const CacheEntry& e : cache_entries(cpu0)) {
    if (e.level == 1 && e.type == "Data") c.l1d_bytes = e.bytes;
    else if (e.level == 1 && e.type == "Unified" && !c.l1d_bytes) c.l1d_bytes = e.bytes;
    else if (e.level == 2 && e.type != "Instruction") c.l2_bytes = e.bytes;
    else if (e.level == 3 && e.type != "Instruction") c.l3_bytes = e.bytes, l3_shared = e.shared;
  }
  if (!c.l3_bytes) return c;
  // Whole package: one entry per distinct L3 instance (CCX, tile) among the
  // CPUs of cpu0's package.
  const std::string package = read_text(cpu0 / "topology" / "physical_package_id");
  std::map<std::string, uint64_t> instances;
  for (const fs::path& dir : cpu_dirs(cpu_root)) {
    const std::string pkg = read_text(dir / "topology" / "physical_package_id");
    if (!package.empty() && !pkg.empty() && pkg != package) continue;
    for (const CacheEntry& e : cache_entries(dir))
      if (e.level == 3 && e.type != "Instruction") instances[e.shared.empty() ? dir.string() : e.shared] = e.bytes;
  }
  uint64_t total = 0;
  for (const auto& [shared, bytes] : instances) total += bytes;
  if (total > c.l3_bytes && !l3_shared.empty()) c.l3_bytes = total;
  return c;
}

CacheSizes detect_caches(const std::string& cpu_root) {
  CacheSizes c = read_sysfs_caches(cpu_root);
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (!c.l1d_bytes) c.l1d_bytes = sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE);
  if (!c.l2_bytes) c.l2_bytes = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
  if (!c.l3_bytes) c.l3_bytes = sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
#endif
  return c;
}

int read_sysfs_cores(const std::string& cpu_root) {
  std::set<std::pair<std::string, std::string>> cores;
  for (const fs::path& dir : cpu_dirs(cpu_root)) {
    const std::string core = read_text(dir / "topology" / "core_id");
    if (core.empty()) continue;
    cores.insert({read_text(dir / "topology" / "physical_package_id"), core});
  }
  return int(cores.size());
}

MemInfo read_meminfo(const std::string& path) {
  MemInfo m;
  std::ifstream in(path);
  std::string line;
  uint64_t free_kb = 0;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kb) == 1) m.total_bytes = kb * 1024;
    else if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) m.available_bytes = kb * 1024;
    else if (std::sscanf(line.c_str(), "MemFree: %llu kB", &kb) == 1) free_kb = kb;
  }
  if (!m.available_bytes) m.available_bytes = free_kb * 1024;
  if (!m.total_bytes) {
    const uint64_t pages = sysconf_bytes(_SC_PHYS_PAGES), page = sysconf_bytes(_SC_PAGESIZE);
    m.total_bytes = pages * page;
  }
  if (!m.available_bytes) {
    const uint64_t pages = sysconf_bytes(_SC_AVPHYS_PAGES), page = sysconf_bytes(_SC_PAGESIZE);
    m.available_bytes = pages * page;
  }
  return m;
}

namespace {

// 1-minute load average, -1 when unknown.
double read_loadavg() {
  double l = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

std::string cpu_model() {
  std::string m = kernels::cpu().model;
  if (m.empty()) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.compare(0, 10, "model name") == 0) {
        const size_t colon = line.find(':');
        if (colon != std::string::npos) m = line.substr(line.find_first_not_of(" \t", colon + 1));
        break;
      }
  }
  return m.empty() ? "unknown CPU" : m;
}

}  // namespace

std::vector<int> bandwidth_thread_counts(int n, int cores) {
  std::vector<int> counts;
  if (n < 1) n = 1;
  if (n <= 16) {
    for (int t = 1; t <= n; ++t) counts.push_back(t);
    return counts;
  }
  for (int t = 1; t <= 8; ++t) counts.push_back(t);
  for (int t = 8; t < n;) {
    t = std::min(n, std::max(t + 1, int(std::lround(t * 1.25))));
    counts.push_back(t);
  }
  if (cores > 8 && cores < n) counts.push_back(cores);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

namespace probe_kernels {

const Kernels& for_active_isa() {
  switch (kernels::active_isa()) {
    case kernels::Isa::Amx: return kernels::tiles_emulated() ? avx512() : amx();
    case kernels::Isa::Avx512: return avx512();
    case kernels::Isa::Avx2: return avx2();
    case kernels::Isa::Scalar: break;
  }
  return scalar();
}

}  // namespace probe_kernels

std::string iso_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

// The machine's description: CPU, cores, ISA, caches and memory. Returns the
// memory figures, whose available part bounds the bandwidth buffer.
MemInfo describe_machine(const ProbeOptions& opt, HwProfile& p) {
  p.date = iso_utc_now();
  p.cpu_model = cpu_model();
  p.threads = kernels::ThreadPool::default_threads();
  p.cores = read_sysfs_cores(opt.cpu_root);
  if (p.cores <= 0 || p.cores > p.threads) p.cores = p.threads;
  p.simd = kernels::isa_name(kernels::active_isa());
  const CacheSizes caches = detect_caches(opt.cpu_root);
  p.l1d_bytes = caches.l1d_bytes;
  p.l2_bytes = caches.l2_bytes;
  p.l3_bytes = caches.l3_bytes;
  const MemInfo mem = read_meminfo(opt.meminfo_path);
  p.mem_bytes = mem.total_bytes;
  if (!p.mem_bytes) throw Error("cannot tell how much memory this machine has (" + opt.meminfo_path + ")");
  return mem;
}

// The streaming buffer: 4 x L3 so that a pass leaves the caches (8 x made the
// first touch take seconds on large-L3 VMs, docs/probe.md), at most half the
// available memory, halved until mmap gives it.
std::unique_ptr<Buffer> bandwidth_buffer(const ProbeOptions& opt, const HwProfile& p, const MemInfo& mem,
                                         std::vector<std::string>& notes) {
  uint64_t want = opt.bw_buffer_bytes;
  if (!want) want = opt.quick ? std::max(256 * kMiB, 4 * p.l3_bytes) : std::max(1 * kGiB, 4 * p.l3_bytes);
  const uint64_t cap = mem.available_bytes / 2;
  if (!opt.bw_buffer_bytes && cap && want > cap) {
    want = cap;
    notes.push_back("bandwidth buffer capped at half the available memory (" + binary_size(cap) + ")");
  }
  want = std::max<uint64_t>(want & ~(2 * kMiB - 1), 2 * kMiB);  // whole 2 MiB pages
  std::unique_ptr<Buffer> buf;
  for (uint64_t size = want; size >= 2 * kMiB; size = (size / 2) & ~(2 * kMiB - 1)) {
    buf = std::make_unique<Buffer>(size_t(size));
    if (buf->p) break;
    buf.reset();
  }
  if (!buf) throw Error("cannot allocate a buffer for the bandwidth test (" + binary_size(want) + ")");
  if (buf->bytes < want) notes.push_back("bandwidth buffer reduced to " + binary_size(buf->bytes) + " (mmap failed)");
  if (p.l3_bytes && buf->bytes < 4 * p.l3_bytes)
    notes.push_back("bandwidth buffer is only " + binary_size(buf->bytes) + ", " +
                    fmt_num(double(buf->bytes) / double(p.l3_bytes), 2) + "x the L3: part of it may be read from cache");
  return buf;
}

void probe_bandwidth(const ProbeOptions& opt, const probe_kernels::Kernels& k, int n, const MemInfo& mem,
                     const Progress& progress, ProbeResult& r) {
  HwProfile& p = r.profile;
  const std::unique_ptr<Buffer> buf = bandwidth_buffer(opt, p, mem, r.notes);
  r.bw_buffer_bytes = buf->bytes;
  // First touch by the threads that will read each slice (pages land on their
  // NUMA node); nonzero bytes, so no page stays the shared zero page.
  const double touch_s = run_together(n, [&](int t) {
    const auto [b, e] = slice(buf->bytes, n, t);
    std::memset(static_cast<char*>(buf->p) + b, 0x5a, e - b);
  });
  progress("probe: touched a " + binary_size(buf->bytes) + " buffer" +
           (p.l3_bytes ? " (" + fmt_num(double(buf->bytes) / double(p.l3_bytes), 2) + "x L3)" : std::string()) +
           " in " + fmt_seconds(touch_s));
  const int passes = opt.bw_passes > 0 ? opt.bw_passes : (opt.quick ? 3 : 8);
  // Windows of 2 x L3 (at least 64 kMiB), at most a quarter of the buffer.
  const uint64_t window = std::max<uint64_t>(4096, std::min(std::max(64 * kMiB, 2 * p.l3_bytes), buf->bytes / 4));
  r.bw_window_bytes = window;
  p.mem_read_bw = measure_bandwidth(k, *buf, window, bandwidth_thread_counts(n, std::min(p.cores, n)), passes,
                                    opt.quick ? 4.0 : 7.0, progress, r.notes);
  p.read_bw_by_size = measure_sized_bandwidth(k, *buf, n, p.l2_bytes, p.l3_bytes, opt.quick, progress);
}

void probe_compute(const ProbeOptions& opt, const probe_kernels::Kernels& k, int n, const Progress& progress,
                   ProbeResult& r) {
  HwProfile& p = r.profile;
  // Many short runs rather than a few long ones: on a shared machine the best
  // of them is likelier to be a window nobody else used.
  const double run_s = opt.compute_run_s > 0 ? opt.compute_run_s : 0.005;
  const int runs = opt.compute_runs > 0 ? opt.compute_runs : (opt.quick ? 30 : 100);
  r.fp32_method = k.fp32_method;
  r.int8_method = k.int8_method;
  // All threads together can always do at least what one does (leave the
  // others idle), so a lower all-threads figure means other processes had the
  // cores: keep the better one and say so.
  auto busy_note = [&](const char* what, Peak& pk) {
    if (n > 1 && pk.all < 1.2 * pk.one)
      r.notes.push_back(std::string(what) + ": " + thread_word(n) + " barely beat (or lost to) 1 thread: other "
                        "processes probably had the other cores");
    pk.all = std::max(pk.all, pk.one);
  };
  Peak fp = measure_compute(k.fp32, k.fp32_flops_per_iter, n, run_s, runs);
  busy_note("fp32", fp);
  r.fp32_flops_1t = fp.one;
  p.peak_fp32_flops = fp.all;
  progress("probe: fp32 FMA (" + r.fp32_method + "): 1 thread " + fmt_flops(fp.one) + ", " + thread_word(n) + " " +
           fmt_flops(fp.all));
  Peak i8 = measure_compute(k.int8, k.int8_ops_per_iter, n, run_s, runs);
  busy_note("int8", i8);
  r.int8_ops_1t = i8.one;
  p.peak_int8_ops = i8.all;
  progress("probe: int8 dot (" + r.int8_method + "): 1 thread " + fmt_ops(i8.one) + ", " + thread_word(n) + " " +
           fmt_ops(i8.all));
}

}  // namespace

ProbeResult run_probe(const ProbeOptions& opt) {
  const Clock::time_point start = Clock::now();
  const Progress progress{opt.progress};
  ProbeResult r;
  HwProfile& p = r.profile;
  const probe_kernels::Kernels& k = probe_kernels::for_active_isa();
  const MemInfo mem = describe_machine(opt, p);
  if (const double load = read_loadavg(); load >= std::max(0.5, 0.1 * p.threads))
    r.notes.push_back("load average " + fmt_num(load, 2) + " when the probe started: other processes compete for "
                      "the cores and memory, the figures may be low");
  const int n = opt.max_threads > 0 ? std::min(opt.max_threads, p.threads) : p.threads;
  progress("probe: " + p.cpu_model + ", " + std::to_string(p.cores) + " cores / " + thread_word(p.threads) + ", " +
           p.simd + "; L1d " + binary_size(p.l1d_bytes) + ", L2 " + binary_size(p.l2_bytes) + ", L3 " +
           binary_size(p.l3_bytes) + "; " + binary_size(p.mem_bytes) + " RAM");

  probe_bandwidth(opt, k, n, mem, progress, r);
  probe_compute(opt, k, n, progress, r);
  // kvlab's kernels: a stream twice the L3 (at least 128 MiB, so small-L3
  // machines still read from DRAM; the working-set curve shows where DRAM
  // starts), no bigger than the bandwidth buffer, which was sized to the free
  // memory.
  p.kernels = measure_engine_kernels(n, std::min<uint64_t>(r.bw_buffer_bytes, std::max(128 * kMiB, 2 * p.l3_bytes)),
                                     opt.quick, opt.progress);
  if (n < p.threads) r.notes.push_back("measured on " + thread_word(n) + " of " + std::to_string(p.threads));
  r.seconds = seconds_since(start);
  return r;
}

// ---- the profile file --------------------------------------------------------

namespace {

std::string temp_path_for(const fs::path& path) {
  return path.string() + ".tmp." + std::to_string(::getpid());
}

[[noreturn]] void cannot_write(const std::string& path, const std::string& why) {
  throw Error("cannot write the hardware profile to '" + path + "': " + why);
}

void prepare_directory(const std::string& path) {
  if (path.empty()) throw Error("the hardware profile path is empty");
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) cannot_write(path, "it is a directory");
  const fs::path parent = p.parent_path();
  if (parent.empty()) return;
  // Find the deepest existing ancestor: it must be a directory.
  for (fs::path a = parent; !a.empty(); a = a.parent_path()) {
    if (fs::exists(a, ec)) {
      if (!fs::is_directory(a, ec)) cannot_write(path, "'" + a.string() + "' is not a directory");
      break;
    }
    if (a == a.parent_path()) break;
  }
  fs::create_directories(parent, ec);
  if (ec) cannot_write(path, "cannot create '" + parent.string() + "' (" + ec.message() + ")");
}

}  // namespace

void check_profile_path(const std::string& path) {
  prepare_directory(path);
  const std::string tmp = temp_path_for(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) cannot_write(path, std::strerror(errno));
  std::fclose(f);
  std::remove(tmp.c_str());
}

void write_hw_profile(const HwProfile& p, const std::string& path) {
  prepare_directory(path);
  const std::string tmp = temp_path_for(path);
  const std::string text = hw_profile_to_json(p);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) cannot_write(path, std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    cannot_write(path, std::strerror(ok ? errno : err));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    cannot_write(path, ec.message());
  }
}

// ---- report --------------------------------------------------------------------

namespace {

void render_bandwidth_md(std::ostringstream& o, const HwProfile& p, const ProbeResult* m) {
  o << "### Memory read bandwidth";
  if (m) o << " (" << binary_size(m->bw_buffer_bytes) << " buffer, best " << binary_size(m->bw_window_bytes) << " window)";
  o << "\n\n| threads | read bandwidth | per thread | vs 1 thread | sustained (best whole pass) |\n"
       "|---:|---:|---:|---:|---:|\n";
  const double bw1 = p.mem_read_bw.empty() ? 0 : p.mem_read_bw.front().bytes_per_s;
  for (const BandwidthPoint& b : p.mem_read_bw)
    o << "| " << b.threads << " | " << fmt_bandwidth(b.bytes_per_s) << " | "
      << fmt_bandwidth(b.bytes_per_s / std::max(1, b.threads)) << " | "
      << (bw1 > 0 ? fmt_factor(b.bytes_per_s / bw1) : std::string("-")) << " | "
      << (b.sustained_bytes_per_s > 0 ? fmt_bandwidth(b.sustained_bytes_per_s) : std::string("-")) << " |\n";
  if (!p.read_bw_by_size.empty()) {
    o << "\nBy working set (all threads reading the same bytes over and over, as a decode step reads its weights and "
         "KV cache; the largest is the DRAM point):\n\n| working set | read bandwidth | vs the largest |\n|---:|---:|---:|\n";
    for (const SizedBandwidth& b : p.read_bw_by_size)
      o << "| " << binary_size(uint64_t(b.bytes)) << " | " << fmt_bandwidth(b.bytes_per_s) << " | "
        << fmt_factor(b.bytes_per_s / p.read_bw_by_size.back().bytes_per_s) << " |\n";
  }
}

void render_compute_md(std::ostringstream& o, const HwProfile& p, const ProbeResult* m) {
  const double bw = p.best_read_bw();
  const std::string all = "all " + thread_word(p.threads);
  o << "\n### Peak compute\n\n| | 1 thread | " << all << " | ridge point (" << all << ") | loop |\n"
    << "|---|---:|---:|---:|---|\n";
  o << "| fp32 FMA | " << (m ? fmt_flops(m->fp32_flops_1t) : std::string("-")) << " | "
    << fmt_flops(p.peak_fp32_flops) << " | "
    << (bw > 0 ? fmt_num(p.peak_fp32_flops / bw) + " FLOP/byte" : std::string("-")) << " | "
    << (m ? m->fp32_method : std::string("-")) << " |\n";
  o << "| int8 dot | " << (m ? fmt_ops(m->int8_ops_1t) : std::string("-")) << " | "
    << (p.peak_int8_ops > 0 ? fmt_ops(p.peak_int8_ops) : std::string("not measured")) << " | "
    << (bw > 0 && p.peak_int8_ops > 0 ? fmt_num(p.peak_int8_ops / bw) + " op/byte" : std::string("-")) << " | "
    << (m ? m->int8_method : std::string("-")) << " |\n";
  o << "\nRidge point: peak / best read bandwidth (" << fmt_bandwidth(bw)
    << "); a kernel doing fewer operations per byte read from memory is bandwidth-bound. "
       "int8 op = 2 per int8 multiply-add.\n";
}

void render_matmul_md(std::ostringstream& o, const HwProfile& p, const KernelRates& k) {
  const double bw = p.best_read_bw();
  o << "\n### kvlab's kernels (" << thread_word(k.threads)
    << ", the median of a few runs)\n\nMatmul, decode: one token, weights streamed from DRAM: time = bytes / "
       "rate + rows x per-row cost + calls x per-call cost. Prefill: 512 tokens, weights in cache: time = FLOPs / "
       "rate + tokens x (cols x per-input cost + rows x per-output cost). Fractions are of the read bandwidth "
       "and of the peak of the arithmetic the kernel uses (int8 dot for q8_0/q4_x, fp32 FMA otherwise).\n\n"
    << "| weights | decode rate | of read bandwidth | per row | per call | prefill rate "
       "| of peak | per input | per output |\n"
    << "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const MatmulRate& r : k.matmul) {
    const bool integer = r.weights.rfind("q", 0) == 0;
    const double peak = integer ? p.peak_int8_ops : p.peak_fp32_flops;
    o << "| " << r.weights << " | " << fmt_bandwidth(r.gemv_bytes_per_s) << " | "
      << (bw > 0 ? fmt_num(100 * r.gemv_bytes_per_s / bw, 2) + "%" : std::string("-")) << " | "
      << fmt_seconds(r.gemv_row_s) << " | " << fmt_seconds(r.gemv_call_s)
      << " | " << (integer ? fmt_ops(r.gemm_ops_per_s) : fmt_flops(r.gemm_ops_per_s))
      << " | " << (peak > 0 ? fmt_num(100 * r.gemm_ops_per_s / peak, 2) + "%" : std::string("-")) << " | "
      << fmt_seconds(r.gemm_input_s) << " | " << fmt_seconds(r.gemm_output_s) << " |\n";
  }
}

void render_attention_md(std::ostringstream& o, const HwProfile& p, const KernelRates& k) {
  auto of_fp32 = [&](double v) { return fmt_num(100 * v / p.peak_fp32_flops, 2) + "%"; };
  o << "\nAttention (4·head_dim + 6 FLOP per query-key pair): decode is one token over 4096 positions, "
       "prefill 512 tokens over positions 1..512.\n\n"
    << "| KV cache | head_dim | query heads per KV head | decode | of fp32 peak | prefill | of fp32 peak |\n"
       "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const AttentionRate& a : k.attention)
    o << "| " << a.kv << " | " << a.head_dim << " | " << a.heads << " | " << fmt_flops(a.decode_flops_per_s) << " | "
      << of_fp32(a.decode_flops_per_s) << " | " << fmt_flops(a.prefill_flops_per_s) << " | "
      << of_fp32(a.prefill_flops_per_s) << " |\n";
  o << "\nElement-wise ops (norms, RoPE, SiLU·up, residual adds): " << fmt_flops(k.elementwise_flops_per_s) << ", "
    << of_fp32(k.elementwise_flops_per_s) << " of the fp32 peak. Thread pool: " << fmt_seconds(k.dispatch_s)
    << " per job.\n";
}

}  // namespace

std::string render_hw_profile_md(const HwProfile& p, const ProbeResult* m, const std::string& path) {
  std::ostringstream o;
  o << "## Hardware profile: " << p.cpu_model << "\n\n";
  o << "probed " << p.date;
  if (m) o << " in " << fmt_seconds(m->seconds);
  if (!path.empty()) o << "; profile: " << path;
  o << "\n\n| | |\n|---|---|\n";
  o << "| CPU | " << p.cpu_model << " |\n";
  o << "| cores / threads | " << p.cores << " / " << p.threads << " |\n";
  o << "| SIMD (kernels) | " << p.simd << " |\n";
  o << "| caches | L1d " << binary_size(p.l1d_bytes) << ", L2 " << binary_size(p.l2_bytes) << " per core; L3 "
    << binary_size(p.l3_bytes) << " |\n";
  o << "| memory | " << binary_size(p.mem_bytes) << " |\n\n";
  render_bandwidth_md(o, p, m);
  render_compute_md(o, p, m);
  if (p.kernels) {
    render_matmul_md(o, p, *p.kernels);
    render_attention_md(o, p, *p.kernels);
  }
  if (m && !m->notes.empty()) {
    o << "\nNotes:\n";
    for (const std::string& n : m->notes) o << "- " << n << "\n";
  }
  return o.str();
}

}  // namespace kvlab::perf

// `kvlab probe`: machine description from a fake sysfs, the profile file, a
// quick probe's numbers (present, positive, finite: no timing assertions),
// the CLI's errors for bad --out paths, and --if-missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "common/error_text.h"
#include "common/scratch_dir.h"
#include "kernels/attention.h"
#include "kernels/cpu.h"
#include "lab/hardware/hw_profile.h"
#include "lab/probe/probe.h"

namespace kvlab::perf {
namespace {

namespace fs = std::filesystem;

using test::error_of;

using TempDir = test::ScratchDir;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

void add_cache(const fs::path& root, int cpu, int index, int level, const char* type, const char* size,
               const char* shared) {
  const fs::path d = root / ("cpu" + std::to_string(cpu)) / "cache" / ("index" + std::to_string(index));
  write(d / "level", std::to_string(level));
  write(d / "type", type);
  write(d / "size", size);
  write(d / "shared_cpu_list", shared);
}

void add_topology(const fs::path& root, int cpu, int package, int core) {
  const fs::path d = root / ("cpu" + std::to_string(cpu)) / "topology";
  write(d / "physical_package_id", std::to_string(package));
  write(d / "core_id", std::to_string(core));
}

// 2 packages x 2 cores x 2 SMT threads; each package has 2 L3 instances
// (one per core here, like two CCXs) of 16 MiB.
void fake_two_socket(const fs::path& root) {
  for (int cpu = 0; cpu < 8; ++cpu) {
    const int package = cpu / 4, core = (cpu / 2) % 2;
    const std::string pair = std::to_string(cpu & ~1) + "-" + std::to_string((cpu & ~1) + 1);
    add_topology(root, cpu, package, core);
    add_cache(root, cpu, 0, 1, "Data", "48K", pair.c_str());
    add_cache(root, cpu, 1, 1, "Instruction", "32K", pair.c_str());
    add_cache(root, cpu, 2, 2, "Unified", "2048K", pair.c_str());
    add_cache(root, cpu, 3, 3, "Unified", "16384K", pair.c_str());
  }
  write(root / "online", "0-7");  // not a cpuN directory: ignored
}

HwProfile sample_profile() {
  HwProfile p;
  p.date = "2025-06-01T12:00:00Z";
  p.cpu_model = "Test CPU 9000";
  p.cores = 2;
  p.threads = 4;
  p.simd = "avx2";
  p.l1d_bytes = 32768;
  p.l2_bytes = 524288;
  p.l3_bytes = 33554432;
  p.mem_bytes = 25000000000ull;
  p.mem_read_bw = {{1, 2.1e10, 1.8e10}, {2, 3.05e10, 2.4e10}, {4, 2.9e10, 2.5e10}};
  p.read_bw_by_size = {{4194304, 9.1e10}, {268435456, 2.8e10}};
  p.peak_fp32_flops = 1.5e11;
  p.peak_int8_ops = 3.1e11;
  return p;
}

TEST(Probe, CacheSizesParse) {
  EXPECT_EQ(parse_cache_size("32K"), 32768u);
  EXPECT_EQ(parse_cache_size("32768K"), 33554432u);
  EXPECT_EQ(parse_cache_size("1M"), 1048576u);
  EXPECT_EQ(parse_cache_size("2 G"), 2147483648u);
  EXPECT_EQ(parse_cache_size("1024"), 1024u);
  EXPECT_EQ(parse_cache_size(""), 0u);
  EXPECT_EQ(parse_cache_size("K"), 0u);
  EXPECT_EQ(parse_cache_size("12X"), 0u);
}

TEST(Probe, CachesAndCoresFromAFakeSysfs) {
  TempDir d;
  fake_two_socket(d.path);
  const CacheSizes c = read_sysfs_caches(d.path.string());
  EXPECT_EQ(c.l1d_bytes, 48u * 1024);  // the data cache, not the instruction one
  EXPECT_EQ(c.l2_bytes, 2048u * 1024);
  EXPECT_EQ(c.l3_bytes, 2 * 16384u * 1024);  // both instances of package 0, none of package 1
  EXPECT_EQ(read_sysfs_cores(d.path.string()), 4);  // 2 packages x 2 cores; SMT siblings counted once
}

TEST(Probe, SingleL3SharedByAllCpus) {
  TempDir d;
  for (int cpu = 0; cpu < 2; ++cpu) {
    add_topology(d.path, cpu, 0, cpu);
    add_cache(d.path, cpu, 0, 1, "Data", "32K", std::to_string(cpu).c_str());
    add_cache(d.path, cpu, 2, 2, "Unified", "512K", std::to_string(cpu).c_str());
    add_cache(d.path, cpu, 3, 3, "Unified", "32768K", "0-1");
  }
  const CacheSizes c = read_sysfs_caches(d.path.string());
  EXPECT_EQ(c.l1d_bytes, 32768u);
  EXPECT_EQ(c.l2_bytes, 524288u);
  EXPECT_EQ(c.l3_bytes, 33554432u);  // one instance, counted once
  EXPECT_EQ(read_sysfs_cores(d.path.string()), 2);
}

TEST(Probe, MissingSysfsGivesZerosAndTheFallbackFillsWhatItCan) {
  TempDir d;
  const CacheSizes c = read_sysfs_caches((d.path / "nothing").string());
  EXPECT_EQ(c.l1d_bytes, 0u);
  EXPECT_EQ(c.l2_bytes, 0u);
  EXPECT_EQ(c.l3_bytes, 0u);
  EXPECT_EQ(read_sysfs_cores((d.path / "nothing").string()), 0);
  // The sysconf fallback: no assertion on its values (a VM may report none),
  // only that it never reports less than sysfs did.
  const CacheSizes f = detect_caches((d.path / "nothing").string());
  EXPECT_GE(f.l1d_bytes, c.l1d_bytes);
}

TEST(Probe, MeminfoParses) {
  TempDir d;
  write(d.path / "meminfo", "MemTotal:       24567892 kB\nMemFree:         1000 kB\nMemAvailable:   23000000 kB");
  const MemInfo m = read_meminfo((d.path / "meminfo").string());
  EXPECT_EQ(m.total_bytes, 24567892ull * 1024);
  EXPECT_EQ(m.available_bytes, 23000000ull * 1024);
  write(d.path / "old", "MemTotal:  2048 kB\nMemFree:  1024 kB");
  EXPECT_EQ(read_meminfo((d.path / "old").string()).available_bytes, 1024ull * 1024);
}

TEST(Probe, ThreadCounts) {
  EXPECT_EQ(bandwidth_thread_counts(1, 1), (std::vector<int>{1}));
  EXPECT_EQ(bandwidth_thread_counts(4, 2), (std::vector<int>{1, 2, 3, 4}));
  const std::vector<int> big = bandwidth_thread_counts(192, 96);
  EXPECT_EQ(big.front(), 1);
  EXPECT_EQ(big.back(), 192);
  EXPECT_TRUE(std::find(big.begin(), big.end(), 96) != big.end());
  EXPECT_TRUE(std::is_sorted(big.begin(), big.end()));
  EXPECT_LT(big.size(), 32u);
}

TEST(Probe, ProfileRoundTripsThroughTheFile) {
  TempDir d;
  const HwProfile p = sample_profile();
  const std::string path = (d.path / "sub" / "dir" / "hw-profile.json").string();  // parents created
  write_hw_profile(p, path);
  const HwProfile q = load_hw_profile(path);
  EXPECT_EQ(q.date, p.date);
  EXPECT_EQ(q.cpu_model, p.cpu_model);
  EXPECT_EQ(q.cores, p.cores);
  EXPECT_EQ(q.threads, p.threads);
  EXPECT_EQ(q.simd, p.simd);
  EXPECT_EQ(q.l1d_bytes, p.l1d_bytes);
  EXPECT_EQ(q.l2_bytes, p.l2_bytes);
  EXPECT_EQ(q.l3_bytes, p.l3_bytes);
  EXPECT_EQ(q.mem_bytes, p.mem_bytes);
  ASSERT_EQ(q.mem_read_bw.size(), p.mem_read_bw.size());
  for (size_t i = 0; i < p.mem_read_bw.size(); ++i) {
    EXPECT_EQ(q.mem_read_bw[i].threads, p.mem_read_bw[i].threads);
    EXPECT_DOUBLE_EQ(q.mem_read_bw[i].bytes_per_s, p.mem_read_bw[i].bytes_per_s);
    EXPECT_DOUBLE_EQ(q.mem_read_bw[i].sustained_bytes_per_s, p.mem_read_bw[i].sustained_bytes_per_s);
  }
  EXPECT_DOUBLE_EQ(q.peak_fp32_flops, p.peak_fp32_flops);
  EXPECT_DOUBLE_EQ(q.peak_int8_ops, p.peak_int8_ops);
  ASSERT_EQ(q.read_bw_by_size.size(), 2u);
  EXPECT_DOUBLE_EQ(q.read_bw_by_size[0].bytes_per_s, 9.1e10);
  EXPECT_EQ(hw_profile_to_json(q), hw_profile_to_json(p));
  // No temporary file is left next to it; a second write replaces the first.
  HwProfile p2 = p;
  p2.cores = 3;
  write_hw_profile(p2, path);
  EXPECT_EQ(load_hw_profile(path).cores, 3);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path / "sub" / "dir")) ++files;
  EXPECT_EQ(files, 1);
}

TEST(Probe, BadPathsAreOneLineErrors) {
  TempDir d;
  write(d.path / "file", "x");
  const std::string under_file = (d.path / "file" / "hw.json").string();
  const std::string e1 = error_of([&] { check_profile_path(under_file); });
  EXPECT_NE(e1.find("cannot write the hardware profile to '" + under_file + "'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("is not a directory"), std::string::npos) << e1;
  EXPECT_EQ(e1.find('\n'), std::string::npos);
  const std::string e2 = error_of([&] { check_profile_path(d.path.string()); });
  EXPECT_NE(e2.find("it is a directory"), std::string::npos) << e2;
  EXPECT_NE(error_of([&] { write_hw_profile(sample_profile(), under_file); }).find("is not a directory"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_profile_path(""); }).find("empty"), std::string::npos);
  EXPECT_EQ(error_of([&] { check_profile_path((d.path / "new" / "hw.json").string()); }), "(no error)");
  EXPECT_FALSE(fs::exists(d.path / "new" / "hw.json"));  // checking writes nothing
}

TEST(Probe, ReportNamesEveryFigure) {
  const std::string md = render_hw_profile_md(sample_profile(), nullptr, "/x/hw-profile.json");
  for (const char* s : {"Test CPU 9000", "| 2 / 4 |", "avx2", "L1d 32 KiB", "L2 512 KiB", "L3 32 MiB", "21.0 GB/s",
                        "30.5 GB/s", "150 GFLOP/s", "310 Gop/s", "| 4 MiB | 91.0 GB/s | 3.2x |", "| 256 MiB | 28.0 GB/s | 1.0x |", "4.92 FLOP/byte", "10.2 op/byte", "/x/hw-profile.json"})
    EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
}

TEST(Probe, QuickProbeFillsEveryField) {
  ProbeOptions o;
  o.quick = true;
  o.bw_buffer_bytes = 32ull << 20;  // small: this checks plumbing, not numbers
  o.bw_passes = 2;
  o.compute_run_s = 0.01;
  o.compute_runs = 2;
  int lines = 0;
  o.progress = [&](const std::string& line) {
    ++lines;
    EXPECT_EQ(line.find('\n'), std::string::npos);
  };
  const ProbeResult r = run_probe(o);
  const HwProfile& p = r.profile;
  EXPECT_GT(lines, 3);
  EXPECT_FALSE(p.date.empty());
  EXPECT_FALSE(p.cpu_model.empty());
  EXPECT_GE(p.threads, 1);
  EXPECT_GE(p.cores, 1);
  EXPECT_LE(p.cores, p.threads);
  EXPECT_EQ(p.simd, kernels::isa_name(kernels::active_isa()));
  EXPECT_GT(p.mem_bytes, 0u);
  EXPECT_EQ(r.bw_buffer_bytes, 32ull << 20);
  ASSERT_FALSE(p.mem_read_bw.empty());
  EXPECT_EQ(p.mem_read_bw.front().threads, 1);
  EXPECT_EQ(p.mem_read_bw.back().threads, p.threads);
  for (const BandwidthPoint& b : p.mem_read_bw) {
    EXPECT_TRUE(std::isfinite(b.bytes_per_s));
    EXPECT_GT(b.bytes_per_s, 0);
    // A whole pass is the windows' total over their summed time: never above the best window.
    EXPECT_GT(b.sustained_bytes_per_s, 0);
    EXPECT_LE(b.sustained_bytes_per_s, b.bytes_per_s);
  }
  // The working-set curve: ascending sizes, the last the whole buffer.
  ASSERT_FALSE(p.read_bw_by_size.empty());
  EXPECT_DOUBLE_EQ(p.read_bw_by_size.back().bytes, double(r.bw_buffer_bytes));
  for (size_t i = 0; i < p.read_bw_by_size.size(); ++i) {
    EXPECT_GT(p.read_bw_by_size[i].bytes_per_s, 0);
    EXPECT_TRUE(std::isfinite(p.read_bw_by_size[i].bytes_per_s));
    if (i > 0) {
      EXPECT_GT(p.read_bw_by_size[i].bytes, p.read_bw_by_size[i - 1].bytes);
    }
  }
  for (double v : {p.peak_fp32_flops, p.peak_int8_ops, r.fp32_flops_1t, r.int8_ops_1t, r.seconds}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0);
  }
  EXPECT_FALSE(r.fp32_method.empty());
  EXPECT_FALSE(r.int8_method.empty());
  // kvlab's kernels: every weight dtype, every KV dtype at two head widths
  // and every pass width.
  ASSERT_TRUE(p.kernels);
  EXPECT_EQ(p.kernels->threads, p.threads);
  EXPECT_EQ(p.kernels->matmul.size(), 11u);
  EXPECT_EQ(p.kernels->attention.size(), 3u * 2u * size_t(kernels::kAttnHeadsPerPass));
  for (const char* kv : {"f32", "f16", "q8_0"})
    for (int hd : {64, 128})
      for (int heads = 1; heads <= kernels::kAttnHeadsPerPass; ++heads) {
        const AttentionRate* a = p.kernels->find_attention(kv, hd, heads);
        ASSERT_NE(a, nullptr) << kv << " " << heads;
        EXPECT_EQ(a->head_dim, hd) << kv << " " << heads;
      }
  for (const char* w : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}) {
    const MatmulRate* m = p.kernels->find_matmul(w);
    ASSERT_NE(m, nullptr) << w;
    for (double v : {m->gemv_bytes_per_s, m->gemm_ops_per_s}) {
      EXPECT_TRUE(std::isfinite(v)) << w;
      EXPECT_GT(v, 0) << w;
    }
    EXPECT_GE(m->gemv_row_s, 0) << w;
    EXPECT_GE(m->gemv_call_s, 0) << w;
    // Within the simulator's range (perf::make_machine), so a probe's profile is always priced.
    for (double v : {m->gemm_input_s, m->gemm_output_s}) {
      EXPECT_GE(v, 0) << w;
      EXPECT_LT(v, 1e-6) << w;
    }
  }
  for (const AttentionRate& a : p.kernels->attention)
    for (double v : {a.decode_flops_per_s, a.prefill_flops_per_s}) {
      EXPECT_TRUE(std::isfinite(v)) << a.kv;
      EXPECT_GT(v, 0) << a.kv;
    }
  EXPECT_TRUE(std::isfinite(p.kernels->elementwise_flops_per_s));
  EXPECT_GT(p.kernels->elementwise_flops_per_s, 0);
  EXPECT_GT(p.kernels->dispatch_s, 0);
  EXPECT_GT(p.kernels->gemv_working_set_bytes, 0);  // the simulator prices the read curve relative to it
  // What it measured is a valid profile.
  const HwProfile q = parse_hw_profile(hw_profile_to_json(p), "probe");
  EXPECT_EQ(q.mem_read_bw.size(), p.mem_read_bw.size());
  EXPECT_EQ(hw_profile_to_json(q), hw_profile_to_json(p));
}

// Every ISA this CPU can run: the loops return finite values and the op
// counts are positive (the scalar set is always available).
TEST(Probe, EveryAvailableKernelSetRuns) {
  std::vector<const probe_kernels::Kernels*> sets = {&probe_kernels::scalar()};
  if (kernels::cpu().best() >= kernels::Isa::Avx2) sets.push_back(&probe_kernels::avx2());
  if (kernels::cpu().best() >= kernels::Isa::Avx512) sets.push_back(&probe_kernels::avx512());
  if (kernels::cpu().best() == kernels::Isa::Amx) sets.push_back(&probe_kernels::amx());
  alignas(64) static uint64_t words[512];
  for (size_t i = 0; i < 512; ++i) words[i] = i + 1;
  for (const auto* k : sets) {
    EXPECT_EQ(k->read_sum(words, sizeof words), 512u * 513 / 2) << k->isa;
    EXPECT_TRUE(std::isfinite(k->fp32(1000))) << k->isa;
    EXPECT_TRUE(std::isfinite(k->int8(1000))) << k->isa;
    EXPECT_GT(k->fp32_flops_per_iter, 0);
    EXPECT_GT(k->int8_ops_per_iter, 0);
  }
}

struct CliRun {
  int status = -1;
  std::string out;  // stdout and stderr together
  bool built() const { return status != 127; }  // 127: the kvlab binary is not there
};
CliRun run_probe_cli(const std::string& args) {
  const std::string cmd = std::string(KVLAB_BINARY) + " probe " + args + " 2>&1";
  std::FILE* f = ::popen(cmd.c_str(), "r");
  CliRun r;
  if (!f) return r;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), int(buf.size()), f)) r.out += buf.data();
  const int raw = ::pclose(f);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

// The CLI rejects a bad --out before measuring, on one line, exit status 1.
TEST(Probe, CliBadOutPathIsOneLineError) {
  TempDir d;
  write(d.path / "file", "x");
  const CliRun r = run_probe_cli("--quick --out " + (d.path / "file" / "p.json").string());
  if (!r.built()) GTEST_SKIP() << "kvlab binary not built";
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.find("kvlab: error: cannot write the hardware profile to"), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// --if-missing (scripts/setup.sh, before the demo) measures when there is no
// profile, then keeps the stored one and says whose it is; a stored file
// that does not parse is an error, not a reason to skip or to overwrite it.
TEST(Probe, CliIfMissingMeasuresOnceThenKeepsTheProfile) {
  TempDir d;
  const fs::path path = d.path / "hw.json";
  const CliRun first = run_probe_cli("--quick --if-missing -o json --out " + path.string());
  if (!first.built()) GTEST_SKIP() << "kvlab binary not built";
  ASSERT_EQ(first.status, 0) << first.out;
  const HwProfile measured = load_hw_profile(path.string());
  const CliRun again = run_probe_cli("--quick --if-missing --out " + path.string());
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.out, "probe: using the profile of " + measured.date + " in " + path.string() +
                           " (`kvlab probe` measures again)\n");
  EXPECT_EQ(hw_profile_to_json(load_hw_profile(path.string())), hw_profile_to_json(measured));

  write(path, "{ not json");
  const CliRun bad = run_probe_cli("--quick --if-missing --out " + path.string());
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_EQ(bad.out.find("kvlab: error: "), 0u) << bad.out;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{ not json\n");  // left as it was

  EXPECT_NE(run_probe_cli("--show --if-missing --out " + path.string()).status, 0);  // one or the other
}

}  // namespace
}  // namespace kvlab::perf

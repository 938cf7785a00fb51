// kvlab bench: llama-bench-style pp/tg throughput, every combination of the
// list-valued options, mean ± stddev over repetitions after a warm-up, each
// row placed on the roofline of this machine (kvlab probe).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/build_info.h"
#include "common/error.h"
#include "kernels/cpu.h"
#include "lab/bench/bench.h"

namespace kvlab::cli {
namespace {

struct BenchOptions {
  std::vector<std::string> models;
  bool mmap = false;
  std::vector<int> n_prompt{512}, n_gen{128}, depth{0}, threads, ubatch{512}, parallel{1};
  std::vector<std::string> pg;  // "PP,TG": prompt then generation, timed together
  std::vector<std::string> kv_types{"f16"};
  int reps = 5;
  bool no_kv_cache = false;
  bool profile_stages = false;
  std::string output = "md";
};

std::string iso_date() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

// "q4_1 x210, q8_0 x1, f32 x61": what the file's tensors are stored as.
std::string dtype_summary(const gguf::File& f) {
  std::map<std::string, int> n;
  for (const auto& t : f.tensors()) ++n[std::string(tensor::dtype_info(t.dtype).name)];
  std::string s;
  for (const auto& [name, count] : n) s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  return s;
}

// Per stage, per pass: seconds, FLOPs and bytes, the achieved rates and,
// with a probe profile, their share of its peaks: a matmul's compute against
// the peak of the weights' arithmetic, the other stages' against fp32 FMA.
nlohmann::json stages_json(const engine::StageProfile& p, const engine::Attribution& a) {
  nlohmann::json j;
  j["passes"] = p.passes;
  j["pass_seconds"] = p.passes ? p.pass_seconds / p.passes : 0;
  j["stages"] = nlohmann::json::array();
  const double n = std::max(1, p.passes);
  for (size_t s = 0; s < model::kStageCount; ++s) {
    const engine::StageWork& w = p.stages[s];
    nlohmann::json st;
    st["stage"] = model::stage_name(model::Stage(s));
    st["seconds"] = w.seconds / n;
    st["share"] = p.pass_seconds > 0 ? w.seconds / p.pass_seconds : 0;
    st["flops"] = w.flops / n;
    st["bytes"] = w.bytes() / n;
    st["gflop_s"] = w.seconds > 0 ? w.flops / w.seconds / 1e9 : 0;
    st["gb_s"] = w.seconds > 0 ? w.bytes() / w.seconds / 1e9 : 0;
    const bool matmul = engine::is_matmul(model::Stage(s));
    const double peak = a.peaks ? (matmul ? a.peaks->flops : a.peaks->fp32_flops) : 0;
    if (peak > 0 && a.peaks->bytes_per_s > 0 && w.seconds > 0) {
      st["peak_kind"] = matmul ? a.peaks->flops_kind : "fp32 FMA";
      st["pct_of_peak_compute"] = 100 * w.flops / w.seconds / peak;
      st["pct_of_peak_bandwidth"] = 100 * w.bytes() / w.seconds / a.peaks->bytes_per_s;
    }
    j["stages"].push_back(st);
  }
  return j;
}

void print_stages(const nlohmann::json& r) {
  const nlohmann::json& p = r["profile"];
  const double unprofiled = r["seconds_per_pass"].get<double>();
  std::printf("\n%s, %d threads, kv %s: %d passes with the stage clock on, %.3f ms per pass (%.3f ms without it)\n\n",
              r["test"].get<std::string>().c_str(), r["threads"].get<int>(),
              r["kv_cache"].get<bool>() ? r["kv_type"].get<std::string>().c_str() : "none", p["passes"].get<int>(),
              p["pass_seconds"].get<double>() * 1e3, unprofiled * 1e3);
  std::printf("| stage | us per pass | share | GFLOP/s | of peak compute | GB/s (weights + KV) | of peak bandwidth |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|\n");
  auto peak = [](const nlohmann::json& st) { return st.contains("peak_kind") ? " " + st["peak_kind"].get<std::string>() : ""; };
  auto pct = [](const nlohmann::json& st, const char* key) {
    char buf[16] = "-";
    if (st.contains(key)) std::snprintf(buf, sizeof buf, "%.0f%%", st[key].get<double>());
    return std::string(buf);
  };
  for (const auto& st : p["stages"])
    std::printf("| %s | %.1f | %.1f%% | %.1f | %s%s | %.2f | %s |\n", st["stage"].get<std::string>().c_str(),
                st["seconds"].get<double>() * 1e6, 100 * st["share"].get<double>(), st["gflop_s"].get<double>(),
                pct(st, "pct_of_peak_compute").c_str(), peak(st).c_str(), st["gb_s"].get<double>(),
                pct(st, "pct_of_peak_bandwidth").c_str());
}

// "512,128" (llama-bench's -pg) -> {512, 128}.
std::pair<int, int> parse_pg(const std::string& arg) {
  const size_t comma = arg.find(',');
  auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
      throw Error("--pg '" + arg + "': expected PROMPT,GEN token counts, e.g. 512,128");
    return std::stoi(s);
  };
  if (comma == std::string::npos) number("");
  const int pp = number(arg.substr(0, comma)), tg = number(arg.substr(comma + 1));
  if (pp < 1 || tg < 1) throw Error("--pg '" + arg + "': both counts must be at least 1");
  return {pp, tg};
}

nlohmann::json row_json(const engine::BenchResult& r) {
  nlohmann::json j;
  j["test"] = r.test.name();
  j["n_prompt"] = r.test.n_prompt;
  j["n_gen"] = r.test.n_gen;
  j["depth"] = r.test.depth;
  j["threads"] = r.test.threads;
  j["n_ubatch"] = r.test.max_batch;
  j["n_parallel"] = r.test.n_parallel;
  j["kv_cache"] = r.test.kv_cache;
  j["kv_type"] = tensor::dtype_info(r.test.kv_type).name;
  j["tok_s"] = r.tok_s;
  j["mean_tok_s"] = r.mean;
  j["stddev_tok_s"] = r.stddev;
  const auto& a = r.roofline;
  if (r.test.n_prompt > 0 && r.test.n_gen > 0) {
    // Both phases: each one's share of its own peak, and no single verdict.
    engine::PhaseWork w = a.prefill;
    w += a.decode;
    j["achieved_gflop_s"] = w.seconds > 0 ? w.flops / w.seconds / 1e9 : 0;
    j["achieved_gb_s"] = w.seconds > 0 ? w.bytes() / w.seconds / 1e9 : 0;
    j["prefill_seconds"] = a.prefill.seconds / double(r.tok_s.size());
    j["decode_seconds"] = a.decode.seconds / double(r.tok_s.size());
    if (a.prefill_verdict && a.decode_verdict && a.peaks) {
      j["prefill_pct_of_peak_compute"] = 100 * a.prefill_verdict->flops_utilization;
      j["decode_pct_of_peak_bandwidth"] = 100 * a.decode_verdict->bw_utilization;
    }
    return j;
  }
  const engine::PhaseWork& w = r.test.n_prompt > 0 ? a.prefill : a.decode;
  j["flops_per_run"] = w.flops / double(r.tok_s.size());
  j["bytes_per_run"] = w.bytes() / double(r.tok_s.size());
  j["achieved_gflop_s"] = w.seconds > 0 ? w.flops / w.seconds / 1e9 : 0;
  j["achieved_gb_s"] = w.seconds > 0 ? w.bytes() / w.seconds / 1e9 : 0;
  if (r.test.n_gen > 0) {
    j["bytes_per_step"] = a.decode_bytes_per_step();
    j["bytes_per_token"] = a.decode_bytes_per_step() / r.test.n_parallel;
  }
  j["seconds_per_pass"] = w.passes ? w.seconds / w.passes : 0;
  if (r.stages) j["profile"] = stages_json(*r.stages, a);
  const auto& v = r.test.n_prompt > 0 ? a.prefill_verdict : a.decode_verdict;
  if (v && a.peaks) {
    j["peak_gflop_s"] = a.peaks->flops / 1e9;
    j["peak_kind"] = a.peaks->flops_kind;
    j["peak_gb_s"] = a.peaks->bytes_per_s / 1e9;
    add_verdict_fields(j, *v);
    if (a.peaks->sustained_bytes_per_s > 0) {
      j["peak_sustained_gb_s"] = a.peaks->sustained_bytes_per_s / 1e9;
      j["pct_of_sustained_bandwidth"] = 100 * v->achieved_bytes_per_s / a.peaks->sustained_bytes_per_s;
    }
    if (r.test.n_prompt == 0 && a.peaks->working_set_bytes_per_s > 0) {
      j["working_set_gb_s"] = a.peaks->working_set_bytes_per_s / 1e9;
      j["pct_of_working_set_bandwidth"] = 100 * v->achieved_bytes_per_s / a.peaks->working_set_bytes_per_s;
    }
  }
  return j;
}

// The header every output form shares: where, when and with what it ran.
nlohmann::json run_header(const BenchOptions& o, const std::optional<perf::HwProfile>& profile) {
  nlohmann::json out;
  out["machine"] = {{"cpu", kernels::cpu().model}, {"isa", kernels::isa_name(kernels::active_isa())},
                    {"profile", profile ? nlohmann::json(profile->date) : nlohmann::json(nullptr)}};
  out["commit"] = build_commit();
  out["weights"] = o.mmap ? "mapped" : "resident (huge pages)";
  out["compiler"] = build_compiler();
  out["date"] = iso_date();
  out["results"] = nlohmann::json::array();
  return out;
}

// The tests for one thread count, KV type and depth: pp and pg tests per
// batch size, then the tg tests.
std::vector<engine::BenchTest> test_plan(const BenchOptions& o, const std::vector<std::pair<int, int>>& pg, int depth,
                                         int threads, tensor::DType kv_type) {
  std::vector<engine::BenchTest> tests;
  for (int ub : o.ubatch) {
    for (int p : o.n_prompt)
      if (p > 0) tests.push_back({p, 0, depth, threads, !o.no_kv_cache, kv_type, ub});
    for (const auto& [p, n] : pg) tests.push_back({p, n, depth, threads, !o.no_kv_cache, kv_type, ub});
  }
  // A tg test's passes are one token per sequence: the batch size does not apply.
  for (int n : o.n_gen)
    if (n > 0)
      for (int np : o.parallel) tests.push_back({0, n, depth, threads, !o.no_kv_cache, kv_type, o.ubatch.front(), np});
  return tests;
}

// Runs every test on one model and appends its rows to `results`.
void bench_model(const BenchOptions& o, const std::string& model_path, const std::vector<int>& threads,
                 const std::vector<std::pair<int, int>>& pg, const std::optional<perf::HwProfile>& profile,
                 nlohmann::json& results) {
  const auto m = model::Model::load(resolve_model_path(model_path), residency(o.mmap));
  const std::string dtypes = dtype_summary(m->file());
  for (int t : threads)
    for (const auto& kv : o.kv_types)
      for (int d : o.depth)
        for (const auto& test : test_plan(o, pg, d, t, *tensor::parse_dtype(kv))) {
          std::fprintf(stderr, "kvlab bench: %s, %d threads, kv %s%s ...\n", test.name().c_str(), t, kv.c_str(),
                       o.no_kv_cache ? " (no KV cache)" : "");
          nlohmann::json j = row_json(engine::run_bench(*m, test, o.reps, profile, o.profile_stages));
          j["model"] = m->file().path();
          j["model_name"] = m->config().name;
          j["model_bytes"] = m->file().file_size();
          j["params"] = m->n_params();
          j["dtypes"] = dtypes;
          results.push_back(j);
        }
}

void print_csv(const nlohmann::json& out) {
  std::printf("model,dtypes,threads,n_ubatch,kv_cache,kv_type,test,mean_tok_s,stddev_tok_s,achieved_gflop_s,achieved_gb_s,"
              "pct_of_peak_compute,pct_of_peak_bandwidth,commit,date,cpu\n");
  for (const auto& r : out["results"])
    std::printf("%s,\"%s\",%d,%d,%d,%s,%s,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%s,%s,\"%s\"\n",
                r["model_name"].get<std::string>().c_str(), r["dtypes"].get<std::string>().c_str(),
                r["threads"].get<int>(), r["n_ubatch"].get<int>(), r["kv_cache"].get<bool>(), r["kv_type"].get<std::string>().c_str(),
                r["test"].get<std::string>().c_str(), r["mean_tok_s"].get<double>(), r["stddev_tok_s"].get<double>(),
                r["achieved_gflop_s"].get<double>(), r["achieved_gb_s"].get<double>(),
                r.value("pct_of_peak_compute", 0.0), r.value("pct_of_peak_bandwidth", 0.0), build_commit(),
                out["date"].get<std::string>().c_str(), kernels::cpu().model.c_str());
}

// A decode row's roofline cell: its share of peak bandwidth, of the
// sustained bandwidth and, where it matters, of the cached working set.
std::string decode_roofline(const nlohmann::json& r) {
  char buf[256], sustained[64] = "", cached[96] = "";
  if (r.contains("pct_of_sustained_bandwidth"))
    std::snprintf(sustained, sizeof sustained, " (%.0f%% of %.1f sustained)",
                  r["pct_of_sustained_bandwidth"].get<double>(), r["peak_sustained_gb_s"].get<double>());
  // Shown where the step's bytes fit in the caches enough to matter.
  if (r.contains("working_set_gb_s") && r["working_set_gb_s"].get<double>() > 1.1 * r["peak_gb_s"].get<double>())
    std::snprintf(cached, sizeof cached, "; %.0f%% of the %.1f GB/s a working set this size reads at",
                  r["pct_of_working_set_bandwidth"].get<double>(), r["working_set_gb_s"].get<double>());
  char per[48];
  const int np = r["n_parallel"].get<int>();
  if (np > 1) std::snprintf(per, sizeof per, "%.1f MB/step of %d tokens", r["bytes_per_step"].get<double>() / 1e6, np);
  else std::snprintf(per, sizeof per, "%.1f MB/token", r["bytes_per_token"].get<double>() / 1e6);
  std::snprintf(buf, sizeof buf, "%.0f%% of %.1f GB/s%s%s; %s; %s", r["pct_of_peak_bandwidth"].get<double>(),
                r["peak_gb_s"].get<double>(), sustained, cached, per, r["bound"].get<std::string>().c_str());
  return buf;
}

std::string roofline_cell(const nlohmann::json& r) {
  char buf[256];
  if (r.contains("prefill_pct_of_peak_compute")) {
    std::snprintf(buf, sizeof buf, "prefill %.0f%% of peak compute, decode %.0f%% of peak bandwidth",
                  r["prefill_pct_of_peak_compute"].get<double>(), r["decode_pct_of_peak_bandwidth"].get<double>());
    return buf;
  }
  if (!r.contains("bound")) return "run `kvlab probe` for peaks";
  if (r["n_prompt"].get<int>() == 0) return decode_roofline(r);
  std::snprintf(buf, sizeof buf, "%.0f%% of %.0f GOP/s %s; %s", r["pct_of_peak_compute"].get<double>(),
                r["peak_gflop_s"].get<double>(), r["peak_kind"].get<std::string>().c_str(),
                r["bound"].get<std::string>().c_str());
  return buf;
}

void print_md(const BenchOptions& o, const nlohmann::json& out) {
  std::printf("kvlab bench | %s (%s) | commit %s | %s | weights %s\n\n", kernels::cpu().model.c_str(),
              kernels::isa_name(kernels::active_isa()), build_commit(), out["date"].get<std::string>().c_str(),
              out["weights"].get<std::string>().c_str());
  // The batch size gets a column only when it was set, as llama-bench's n_ubatch.
  const bool ub_column = o.ubatch != std::vector<int>{512};
  std::printf("| model | size | dtypes | threads |%s KV | test | t/s | GFLOP/s | GB/s | roofline |\n", ub_column ? " ub |" : "");
  std::printf("|---|---|---|--:|%s---|---|--:|--:|--:|---|\n", ub_column ? "--:|" : "");
  for (const auto& r : out["results"]) {
    const bool prompt = r["n_prompt"].get<int>() > 0;  // a tg test's passes are single tokens
    const std::string ub = !ub_column ? "" : prompt ? " " + std::to_string(r["n_ubatch"].get<int>()) + " |" : " - |";
    std::printf("| %s | %s | %s | %d |%s %s | %s | %.2f ± %.2f | %.1f | %.2f | %s |\n",
                r["model_name"].get<std::string>().c_str(),
                human_bytes(r["model_bytes"].get<double>()).c_str(), r["dtypes"].get<std::string>().c_str(),
                r["threads"].get<int>(), ub.c_str(),
                r["kv_cache"].get<bool>() ? r["kv_type"].get<std::string>().c_str() : "none",
                r["test"].get<std::string>().c_str(), r["mean_tok_s"].get<double>(), r["stddev_tok_s"].get<double>(),
                r["achieved_gflop_s"].get<double>(), r["achieved_gb_s"].get<double>(), roofline_cell(r).c_str());
  }
  for (const auto& r : out["results"])
    if (r.contains("profile")) print_stages(r);
}

void bench(const BenchOptions& o) {
  if (o.output != "md" && o.output != "json" && o.output != "csv") throw Error("-o must be md, json or csv");
  if (o.profile_stages && o.output == "csv") throw Error("--profile needs -o md or json: its stage tables have no csv form");
  const auto profile = engine::try_load_profile();
  std::vector<int> threads = o.threads;
  if (threads.empty()) threads = {kernels::ThreadPool::default_threads()};
  std::vector<std::string> models = o.models;
  if (models.empty()) models = {""};
  std::vector<std::pair<int, int>> pg;
  for (const std::string& a : o.pg) pg.push_back(parse_pg(a));

  nlohmann::json out = run_header(o, profile);
  for (const auto& model_path : models) bench_model(o, model_path, threads, pg, profile, out["results"]);

  if (o.output == "json")
    std::cout << out.dump(2) << "\n";
  else if (o.output == "csv")
    print_csv(out);
  else
    print_md(o, out);
}

}  // namespace

void add_bench_command(CLI::App& root) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = root.add_subcommand("bench", "llama-bench-style pp/tg throughput with roofline attribution");
  app->add_option("-m,--model", o->models, "GGUF model file(s) (default: the default model)");
  add_residency_option(*app, o->mmap);
  app->add_option("-p,--n-prompt", o->n_prompt, "prompt lengths for pp tests (0: none)")->capture_default_str()
      ->delimiter(',')->check(CLI::Range(0, 1 << 20));
  app->add_option("-n,--n-gen", o->n_gen, "generated lengths for tg tests (0: none)")->capture_default_str()
      ->delimiter(',')->check(CLI::Range(0, 1 << 20));
  app->add_option("--pg", o->pg, "PROMPT,GEN: a prompt then a generation, timed together (llama-bench's -pg); repeatable");
  app->add_option("--ub,--ubatch-size", o->ubatch, "tokens per forward pass of a prompt (longer prompts are chunked)")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1 << 20));
  app->add_option("-d,--depth", o->depth, "KV cache depths to test at")->capture_default_str()->delimiter(',')
      ->check(CLI::Range(0, 1 << 24));
  app->add_option("-r,--repetitions", o->reps, "repetitions of each test")->capture_default_str()->check(CLI::Range(1, 1000));
  app->add_option("-t,--threads", o->threads, "thread counts (default: all cores)")->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app->add_option("--np,--parallel", o->parallel,
                  "sequences decoding together in each tg test, one token each per pass (llama-batched-bench's "
                  "-npl); t/s counts all of them")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1024));
  app->add_flag("--no-kv-cache", o->no_kv_cache, "recompute the whole sequence at every step");
  app->add_flag("--profile", o->profile_stages,
                "also time each stage of the forward pass (extra repetitions after the timed ones) and put it on "
                "the roofline");
  app->add_option("--kv-type", o->kv_types, "KV cache types")->capture_default_str()->delimiter(',')
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  app->add_option("-o,--output", o->output, "md, json or csv")->capture_default_str()
      ->check(CLI::IsMember({"md", "json", "csv"}));
  app->callback([o] { bench(*o); });
}

}  // namespace kvlab::cli

#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "common/error.h"
#include "engine/scheduler.h"
#include "tokenizer/gguf_vocab.h"

namespace kvlab::cli {

namespace fs = std::filesystem;

namespace {
CLI::Validator sign_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "expected a number, got '" + text + "'";
        if (v > 0 || (zero_allowed && v == 0)) return {};
        return std::string(zero_allowed ? "must be 0 or more" : "must be above 0") + ", got " + text;
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}
}  // namespace

const CLI::Validator& positive_number() {
  static const CLI::Validator v = sign_check(false);
  return v;
}

const CLI::Validator& non_negative_number() {
  static const CLI::Validator v = sign_check(true);
  return v;
}

constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::string default_model_path() {
  // build/kvlab -> <repo>/models/...; fall back to ./models/... from the cwd.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path p = exe.parent_path().parent_path() / "models" / kDefaultModelFile;
    if (fs::exists(p, ec)) return p.string();
  }
  return (fs::path("models") / kDefaultModelFile).string();
}

std::string resolve_model_path(const std::string& m) {
  const std::string path = m.empty() ? default_model_path() : m;
  if (m.empty() && !fs::exists(path))
    throw Error(path + ": default model not found; run scripts/setup.sh (or pass -m MODEL.gguf)");
  return path;
}

void add_residency_option(CLI::App& app, bool& mmap) {
  app.add_flag("--mmap", mmap,
               "map the model file instead of reading it into huge-page memory (shares the page cache with "
               "other processes; slower decode)");
}

gguf::Residency residency(bool mmap) { return mmap ? gguf::Residency::Mapped : gguf::Residency::Resident; }

void add_model_option(CLI::App& app, ModelOptions& o) {
  app.add_option("-m,--model", o.model, "GGUF model file (default: models/" + std::string(kDefaultModelFile) + ")");
  add_residency_option(app, o.mmap);
}

void add_draft_options(CLI::App& app, engine::DraftOptions& o) {
  app.add_option("--draft", o.max_tokens,
                 "speculative decoding: draft up to N tokens per step by prompt lookup (0: off); same tokens, fewer passes")
      ->check(CLI::Range(0, engine::kMaxDraftTokens))
      ->capture_default_str();
  app.add_option("--draft-ngram", o.ngram_max, "the longest context suffix that --draft looks up")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
}

void add_pass_target_option(CLI::App& app, double& ms, const std::string& help) {
  // "auto" is the scheduler's negative value; a number must be all of the
  // text (std::stod alone would take "5ms" as 5).
  static const CLI::Validator ms_or_auto(
      [](std::string& v) -> std::string {
        if (v == "auto") return "";
        size_t used = 0;
        double x = -1;
        try {
          x = std::stod(v, &used);
        } catch (const std::exception&) {
        }
        if (used == v.size() && x >= 0 && x <= engine::kMaxPassTargetMs) return "";
        return "must be auto or milliseconds from 0 to " + std::to_string(int(engine::kMaxPassTargetMs)) + ", got '" +
               v + "'";
      },
      "MS|auto");
  app.add_option_function<std::string>(
         "--pass-target-ms", [&ms](const std::string& v) { ms = v == "auto" ? -1 : std::stod(v); },
         help + ": the time a pass with decode rows aims at; its prompt chunk is cut to fit, as the passes' measured "
                "costs predict (auto: twice a decode-only pass; 0: off, every pass takes --prefill-chunk tokens)")
      ->check(ms_or_auto)
      ->default_str("auto");
}

void add_session_options(CLI::App& app, ModelOptions& o) {
  app.add_option("-c,--ctx-size", o.n_ctx, "context size in tokens (0: min(training context, 4096))")
      ->capture_default_str()->check(non_negative_number());
  app.add_option("-t,--threads", o.threads, "threads (0: all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_flag("--no-kv-cache", o.no_kv_cache, "recompute the whole sequence at every step (no KV cache)");
  app.add_option("--kv-type", o.kv_type, "KV cache element type")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "q8_0"}));
}

Loaded load(const ModelOptions& o) {
  Loaded l;
  l.model = model::Model::load(resolve_model_path(o.model), residency(o.mmap));
  l.tokenizer = tokenizer::Tokenizer::create(tokenizer::vocab_from_gguf(l.model->file()));
  if (l.tokenizer->n_vocab() != l.model->config().n_vocab)
    throw Error(l.model->file().path() + ": tokenizer has " + std::to_string(l.tokenizer->n_vocab()) +
                " tokens but token_embd has " + std::to_string(l.model->config().n_vocab) + " rows");
  return l;
}

engine::SessionOptions session_options(const ModelOptions& o, const model::Config& cfg) {
  engine::SessionOptions s;
  s.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(cfg.n_ctx_train, 4096);
  if (s.n_ctx > cfg.n_ctx_train)
    throw Error("context " + std::to_string(s.n_ctx) + " exceeds the model's training context " +
                std::to_string(cfg.n_ctx_train));
  s.n_threads = o.threads;
  s.kv_cache = !o.no_kv_cache;
  s.kv_type = *tensor::parse_dtype(o.kv_type);
  return s;
}

std::string read_file(const std::string& path) {
  // The files read here are prompts and run records: a cap keeps a device
  // or a wrong path (-f /dev/zero) from filling the memory. 64 MiB is far
  // more text than any context holds.
  constexpr size_t kMaxBytes = size_t(64) << 20;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > kMaxBytes) throw Error(path + ": larger than 64 MiB, too large for a prompt or a run record");
  }
  if (in.bad()) throw Error(path + ": read error");
  return text;
}

void add_verdict_fields(nlohmann::json& j, const perf::Verdict& v) {
  j["pct_of_peak_compute"] = 100 * v.flops_utilization;
  j["pct_of_peak_bandwidth"] = 100 * v.bw_utilization;
  j["intensity_flop_per_byte"] = v.intensity;
  j["ridge_flop_per_byte"] = v.ridge;
  j["bound"] = perf::bound_name(v.bound);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

}  // namespace kvlab::cli

// Pieces several subcommands share: the model/session options, loading, and
// printing helpers. Options are declared once here so every subcommand spells
// and documents them the same way.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>

#include "engine/ngram_draft.h"
#include "engine/session.h"
#include "lab/hardware/roofline.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::cli {

struct ModelOptions {
  std::string model;       // -m (default model when empty)
  int n_ctx = 0;           // -c; 0: min(training context, 4096)
  int threads = 0;         // -t; 0: all cores
  bool no_kv_cache = false;
  std::string kv_type = "f16";
  bool mmap = false;       // --mmap: map the file instead of reading it into huge pages
};

// Option checks for a number above zero, or zero or above. CLI11's
// PositiveNumber and NonNegativeNumber name the largest double, all 309
// digits of it, in their messages; these say what is wanted and what came.
const CLI::Validator& positive_number();
const CLI::Validator& non_negative_number();

void add_model_option(CLI::App& app, ModelOptions& o);  // -m --mmap
void add_residency_option(CLI::App& app, bool& mmap);   // --mmap
gguf::Residency residency(bool mmap);
void add_session_options(CLI::App& app, ModelOptions& o);  // -c -t --no-kv-cache --kv-type
void add_draft_options(CLI::App& app, engine::DraftOptions& o);  // --draft --draft-ngram
// --pass-target-ms (engine::SchedulerOptions::pass_target_ms): a number of
// milliseconds from 0 (off) up, or auto; `help` leads its help text.
void add_pass_target_option(CLI::App& app, double& ms, const std::string& help);

struct Loaded {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};
Loaded load(const ModelOptions& o);
engine::SessionOptions session_options(const ModelOptions& o, const model::Config& cfg);
std::string resolve_model_path(const std::string& m);

std::string read_file(const std::string& path);  // throws kvlab::Error

// Adds a roofline verdict's fields (% of peaks, intensity, ridge, bound) to a
// JSON object, with the same names in `run --json` and `bench -o json`.
void add_verdict_fields(nlohmann::json& j, const perf::Verdict& v);
std::string human_bytes(double bytes);

}  // namespace kvlab::cli

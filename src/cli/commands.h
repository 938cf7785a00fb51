// Every subcommand lives in its own cli/cmd_<name>.cpp and registers itself
// on the root app here; main.cpp only dispatches and reports errors once.
#pragma once
#include <CLI/CLI.hpp>

namespace kvlab::cli {

// Each adder declares the subcommand's options (name, default, help) and sets
// its callback. A callback throws kvlab::Error for bad input; main prints it on
// one line and exits non-zero.
void add_run_command(CLI::App& root);
void add_tokenize_command(CLI::App& root);
void add_info_command(CLI::App& root);
void add_demo_command(CLI::App& root);
void add_quantize_command(CLI::App& root);
void add_bench_command(CLI::App& root);
void add_simulate_command(CLI::App& root);
void add_diagnose_command(CLI::App& root);
void add_probe_command(CLI::App& root);
void add_serve_command(CLI::App& root);
void add_perplexity_command(CLI::App& root);

// Path of the default model (models/SmolLM2-135M-Instruct.Q4_1.gguf next to
// the source tree, or $KVLAB_MODEL_DIR), used when -m is not given.
std::string default_model_path();

}  // namespace kvlab::cli

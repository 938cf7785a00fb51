// kvlab: an LLM inference engine and performance lab. Dispatches to the
// subcommands (cli/cmd_*.cpp) and reports any error once, on one line.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "common/error.h"
#include "kernels/cpu.h"

namespace {

// KVLAB_ISA=scalar|avx2|avx512|amx runs a lower kernel set than the CPU's best,
// so one machine can time the sets side by side (kvlab bench records which
// one ran). Unset or empty: the best.
void apply_isa_override() {
  const char* want = std::getenv("KVLAB_ISA");
  if (!want || !*want) return;
  using kvlab::kernels::Isa;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx})
    if (std::string(want) == kvlab::kernels::isa_name(isa)) return kvlab::kernels::set_isa(isa);
  throw kvlab::Error("KVLAB_ISA=" + std::string(want) + ": expected scalar, avx2, avx512 or amx");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvlab: run GGUF models on the CPU, with and without a KV cache, and measure why"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  kvlab::cli::add_run_command(app);
  kvlab::cli::add_tokenize_command(app);
  kvlab::cli::add_info_command(app);
  kvlab::cli::add_demo_command(app);
  kvlab::cli::add_quantize_command(app);
  kvlab::cli::add_bench_command(app);
  kvlab::cli::add_simulate_command(app);
  kvlab::cli::add_diagnose_command(app);
  kvlab::cli::add_probe_command(app);
  kvlab::cli::add_serve_command(app);
  kvlab::cli::add_perplexity_command(app);
  try {
    apply_isa_override();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kvlab::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kvlab: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvlab: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvlab: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}

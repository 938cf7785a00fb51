// kvlab: an LLM inference engine and performance lab. Dispatches to the
// subcommands (cli/cmd_*.cpp) and reports any error once, on one line.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "common/error.h"

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
  try {
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

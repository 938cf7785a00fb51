// kvlab probe: measure this machine (read bandwidth per thread count, peak
// FP32 FMA and int8 dot throughput, caches, cores), write the hardware
// profile the simulator's `--hw this` and `kvlab bench` use, print it.
// `--show` prints the stored profile without measuring; `--if-missing`
// measures only when there is none. Method: docs/probe.md.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/error.h"
#include "lab/hardware/hw_profile.h"
#include "lab/probe/probe.h"
#include "lab/report/report.h"

namespace kvlab::cli {
namespace {

struct ProbeCliOptions {
  std::string output = "md";
  std::string out = perf::default_hw_profile_path();
  bool quick = false;
  bool show = false;
  bool if_missing = false;
};

void probe(const ProbeCliOptions& o) {
  const perf::Format format = perf::parse_format(o.output, false);
  if (o.show) {
    const perf::HwProfile p = perf::load_hw_profile(o.out);
    std::cout << (format == perf::Format::Json ? perf::hw_profile_to_json(p) : perf::render_hw_profile_md(p, nullptr, o.out));
    return;
  }
  std::error_code ec;
  if (o.if_missing && std::filesystem::exists(o.out, ec)) {
    // Said, not silently skipped: the profile is the yardstick of every
    // roofline figure that follows, so its date belongs in the record.
    const perf::HwProfile p = perf::load_hw_profile(o.out);  // a bad file is an error, not a skip
    std::fprintf(stderr, "probe: using the profile of %s in %s (`kvlab probe` measures again)\n", p.date.c_str(),
                 o.out.c_str());
    return;
  }
  perf::check_profile_path(o.out);  // before spending seconds measuring
  perf::ProbeOptions opt;
  opt.quick = o.quick;
  opt.progress = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  const perf::ProbeResult r = perf::run_probe(opt);
  perf::write_hw_profile(r.profile, o.out);
  if (format == perf::Format::Json)  // the table lists them; JSON has no room
    for (const std::string& note : r.notes) std::fprintf(stderr, "probe: note: %s\n", note.c_str());
  std::fprintf(stderr, "probe: done in %.1f s; wrote %s\n", r.seconds, o.out.c_str());
  std::cout << (format == perf::Format::Json ? perf::hw_profile_to_json(r.profile)
                                             : perf::render_hw_profile_md(r.profile, &r, o.out));
}

}  // namespace

void add_probe_command(CLI::App& root) {
  auto o = std::make_shared<ProbeCliOptions>();
  CLI::App* app = root.add_subcommand(
      "probe", "measure this machine (read bandwidth, peak FP32 and int8 throughput, caches) and cache the profile");
  app->add_option("-o,--output", o->output, "md or json (json: the profile itself)")->capture_default_str();
  app->add_option("--out", o->out, "where the profile is written (--show: read)")->capture_default_str();
  app->add_flag("--quick", o->quick, "smaller buffer, shorter runs (~2 s, noisier)");
  app->add_flag("--show", o->show, "print the stored profile without measuring");
  app->add_flag("--if-missing", o->if_missing, "measure only when no profile is stored (scripts/setup.sh, before the demo)")
      ->excludes(app->get_option("--show"));
  app->callback([o] { probe(*o); });
}

}  // namespace kvlab::cli

#include "lab/simulate/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "lab/report/units.h"
#include "lab/simulate/simulate.h"

extern char** environ;

namespace kvlab::perf {

namespace {

namespace fs = std::filesystem;

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((fs::path(dir) / exe).c_str(), X_OK) == 0) return true;
  return false;
}

// gnuplot strings are single-quoted; a quote inside cannot be escaped there.
std::string quoted(const std::string& s) {
  if (s.find('\'') != std::string::npos) throw Error("plot: path must not contain a single quote: " + s);
  return "'" + s + "'";
}

std::string terminal_for(const std::string& out) {
  const std::string ext = fs::path(out).extension().string();
  if (ext == ".png") return "pngcairo size 1000,600 enhanced font 'Sans,11'";
  if (ext == ".svg") return "svg size 1000,600 dynamic enhanced font 'Sans,11'";
  throw Error("plot: the output must end in .png or .svg, got '" + out + "'");
}

void run_gnuplot(const std::string& script) {
  std::string exe = "gnuplot";
  char* argv[] = {exe.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ) != 0) throw Error("plot: could not start gnuplot");
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("plot: gnuplot failed on " + script);
}

}  // namespace

void plot_simulation(const Simulation& s, const std::string& out_path) {
  const std::string terminal = terminal_for(out_path);
  if (!on_path("gnuplot"))
    throw Error("plot: gnuplot not found on PATH; install it (Debian: apt-get install gnuplot-nox)");
  if (s.steps.empty()) throw Error("plot: nothing to plot (--gen 0)");

  std::string tmpl = (fs::temp_directory_path() / "kvlab-plot-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw Error("plot: cannot create a temporary directory");
  const fs::path dir = tmpl;
  const fs::path data = dir / "steps.tsv", script = dir / "plot.gp";

  {
    std::ofstream d(data);
    d << "# position\tcached_tok_s\tnocache_tok_s\n";
    for (const Step& st : s.steps)
      d << st.position << '\t' << (s.opt.with_cache ? 1.0 / st.cached.seconds : 0.0) << '\t'
        << (s.opt.without_cache ? 1.0 / st.naive.seconds : 0.0) << '\n';
  }

  const std::string out = fs::absolute(out_path).string();
  std::ofstream g(script);
  g << "set terminal " << terminal << "\n"
    << "set output " << quoted(out) << "\n"
    << "set title "
    << quoted(s.model_id + " on " + s.hw.name + ": decode speed vs sequence position (" + s.opt.weights +
              " weights, prompt " + std::to_string(s.opt.prompt) + ", TTFT " + fmt_seconds(s.prefill.seconds) + ")")
    << "\n"
    << "set xlabel 'sequence position (tokens)'\n"
    << "set ylabel 'tokens per second (log scale)'\n"
    << "set logscale y\n"
    << "set grid xtics ytics mytics\n"
    << "set key top right box opaque\n"
    << "set xrange [" << s.steps.front().position << ":" << s.steps.back().position << "]\n";
  if (s.opt.without_cache && s.crossover && *s.crossover >= s.steps.front().position &&
      *s.crossover <= s.steps.back().position)
    g << "set arrow from " << *s.crossover << ", graph 0 to " << *s.crossover
      << ", graph 1 nohead dashtype 2 linecolor rgb '#888888'\n"
      << "set label " << quoted("no-cache turns compute-bound (position " + std::to_string(*s.crossover) + ")")
      << " at " << *s.crossover << ", graph 0.06 offset 1,0 textcolor rgb '#555555'\n";
  g << "plot ";
  bool first = true;
  if (s.opt.with_cache) {
    g << quoted(data.string()) << " using 1:2 with lines linewidth 2 linecolor rgb '#1f77b4' title 'with KV cache'";
    first = false;
  }
  if (s.opt.without_cache)
    g << (first ? "" : ", ") << quoted(data.string())
      << " using 1:3 with lines linewidth 2 linecolor rgb '#d62728' title 'without KV cache (naive recompute)'";
  g << "\n";
  g.close();

  run_gnuplot(script.string());
  std::error_code ec;
  fs::remove_all(dir, ec);  // leave nothing behind once the picture exists
}

}  // namespace kvlab::perf

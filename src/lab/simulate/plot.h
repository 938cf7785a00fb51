// The "Run Simulation" chart: decode tok/s against sequence position, with
// and without the KV cache, drawn by gnuplot (Debian package gnuplot-nox).
#pragma once
#include <string>

namespace kvlab::perf {

struct Simulation;

// Writes the data and a gnuplot script to a fresh temporary directory and runs
// gnuplot on them; the picture's format follows the extension (.png or .svg).
// Throws kvlab::Error when gnuplot is missing or fails.
void plot_simulation(const Simulation& s, const std::string& out_path);

}  // namespace kvlab::perf

// The simulator against published measurements (docs/validation/published.json):
// each measurement names catalog hardware (and how many devices, tensor- or
// pipeline-parallel), a catalog model, the weight format and the run's
// shape. validate() predicts the same metric twice:
//  - with the documented default efficiencies, nothing fitted;
//  - leave-one-out, with two parameters of its device class (the memory the
//    device streams from: HBM, GDDR, LPDDR unified, DDR; each goes with one
//    kind of compute) fitted by least squares on the other rows of that class
//    and metric, never on the row it predicts: the fraction of the peak the
//    class delivers and a fixed cost (per layer of a decode step, per request
//    of a prefill). See ValidationRow.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lab/hardware/hardware.h"
#include "lab/report/report.h"
#include "lab/simulate/simulate.h"

namespace kvlab::perf {

struct Measurement {
  std::string id;
  std::string engine;  // "llama.cpp", "gpt-fast", ...
  std::string source;  // title of the page, PR or README
  std::string url;
  std::string date;      // of the measurement
  std::string hardware;  // catalog id
  int tp = 1, pp = 1;    // devices: tensor-parallel x pipeline stages, over the device's default link
  std::string model;     // catalog id
  std::string weights;   // weight format
  // Average bits per weight of a mixed-quantization file, when it differs
  // from the format's (llama.cpp's K-quants); `weights` then sets the math.
  std::optional<double> bits_per_weight;
  std::string kv = "f16";
  std::string metric;  // "decode_tok_s" (mean over gen steps) or "prefill_tok_s" (prompt / TTFT)
  int64_t prompt = 1;  // tokens before decoding, or the prefill length
  int64_t gen = 1;     // decode steps averaged
  int64_t batch = 1;
  double measured = 0;     // tok/s
  std::string conditions;  // what the source says about the setup
  bool secondary = false;  // read in a compilation or crowd-sourced page, not the engine's own thread
  // Why the row is left out of every fit (an engine without kernels for the
  // hardware, an experimental code path); empty: it takes part. It is still
  // predicted and listed.
  std::string outlier;
  bool decode() const { return metric == "decode_tok_s"; }
};

// Throws kvlab::Error naming the file, the entry and the field.
std::vector<Measurement> parse_measurements(const std::string& json_text, const std::string& origin);
std::vector<Measurement> load_measurements(const std::string& path);

struct ValidationRow {
  Measurement m;
  MemoryClass device_class = MemoryClass::Hbm;
  double predicted = 0;  // tok/s, default efficiencies
  double ratio = 0;      // predicted / measured
  Bound bound = Bound::Memory;
  // Leave-one-out, from the other rows of the same class and metric
  // (loo_rows of them; none: the defaults): the time of a decode step or a
  // prefill is its roofline time at 100% of the peaks / loo_efficiency
  // (bandwidth for decode, compute for prefill) + a fixed cost, loo_fixed_s
  // per layer of a decode step (launches, synchronisation) or per request of a
  // prefill (the server's work around it), both fitted by least squares.
  double loo_efficiency = 0;
  double loo_fixed_s = 0;
  int loo_rows = 0;
  double loo_predicted = 0;
  double loo_ratio = 0;
};

// A class's parameters fitted on all of its rows of one metric: what the
// leave-one-out fits leave one row out of.
struct ClassFitRow {
  MemoryClass device_class = MemoryClass::Hbm;
  bool decode = true;
  int rows = 0;
  double efficiency = 0, fixed_s = 0;
};

struct Validation {
  std::vector<ValidationRow> rows;
  std::vector<ClassFitRow> classes;
};

Validation validate(const std::vector<Measurement>& ms, const Efficiency& eff);
std::string render_validation(const Validation& v, const Efficiency& eff, Format f);

}  // namespace kvlab::perf

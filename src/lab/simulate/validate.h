// The simulator against published measurements (docs/validation/published.json):
// each measurement names catalog hardware, a catalog model, the weight format
// and the run's shape; validate() predicts the same metric with the default
// efficiencies and reports predicted / measured. No per-case tuning: every
// row is priced with the same Efficiency.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  std::string model;     // catalog id
  std::string weights;   // weight format
  std::string kv = "f16";
  std::string metric;  // "decode_tok_s" (mean over gen steps) or "prefill_tok_s" (prompt / TTFT)
  int64_t prompt = 1;  // tokens before decoding, or the prefill length
  int64_t gen = 1;     // decode steps averaged
  int64_t batch = 1;
  double measured = 0;     // tok/s
  std::string conditions;  // what the source says about the setup
};

// Throws kvlab::Error naming the file, the entry and the field.
std::vector<Measurement> parse_measurements(const std::string& json_text, const std::string& origin);
std::vector<Measurement> load_measurements(const std::string& path);

struct ValidationRow {
  Measurement m;
  double predicted = 0;  // tok/s
  double ratio = 0;      // predicted / measured
  Bound bound = Bound::Memory;
};

std::vector<ValidationRow> validate(const std::vector<Measurement>& ms, const Efficiency& eff);
std::string render_validation(const std::vector<ValidationRow>& rows, const Efficiency& eff, Format f);

}  // namespace kvlab::perf

// Rendering of simulator, diagnosis and validation results: md (readable
// tables), json (every number, machine-readable) and csv (one row per item).
#pragma once
#include <string>
#include <string_view>

namespace kvlab::perf {

enum class Format { Md, Json, Csv };
// Throws kvlab::Error naming the accepted spellings.
Format parse_format(std::string_view name, bool csv_allowed = true);

struct Simulation;
struct Diagnosis;
struct Grade;

std::string render_simulation(const Simulation& s, Format f);
// A few lines for `kvlab demo`: TTFT and first/last/average tok/s with and
// without the cache, and the crossover.
std::string render_simulation_summary(const Simulation& s);

std::string render_diagnosis(const Diagnosis& d, Format f);  // md or json
std::string render_grade(const Grade& g, Format f);          // md or json

}  // namespace kvlab::perf

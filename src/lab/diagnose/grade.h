// Grading a free-text diagnosis (the seed's exercise: "Which phase is
// struggling, and why?"). Three points are checked against a Diagnosis: the
// phase, the limiting resource and the upgrade. The reader is a small
// keyword matcher with negation scopes ("not compute-bound", "more TFLOPS
// won't help", "prefill is fine", "memory rather than FLOPS"), not a language
// model: it is meant for short answers, and says what it looked for.
#pragma once
#include <string>
#include <string_view>

#include "lab/diagnose/diagnose.h"

namespace kvlab::perf {

enum class Mark { Right, Partial, Wrong, Missing };
std::string_view mark_name(Mark m);  // "right", "partial", "wrong", "missing"

struct Expected {
  Phase phase = Phase::Decode;
  Resource resource = Resource::MemoryBandwidth;
  std::string phase_evidence;     // why that phase, in numbers
  std::string resource_evidence;  // why that resource, in numbers
  std::string upgrade_evidence;   // why that upgrade, in numbers
};
Expected expected_from(const Diagnosis& d);

struct GradePoint {
  Mark mark = Mark::Missing;
  std::string feedback;
};

struct Grade {
  std::string answer;
  GradePoint phase, resource, upgrade;
  double score() const;  // right = 1, partial = 0.5, out of 3
};

Grade grade_answer(std::string_view answer, const Expected& e);

}  // namespace kvlab::perf

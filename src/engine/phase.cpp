#include "engine/phase.h"

namespace kvlab::engine {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Recompute: return "recompute";
  }
  return "?";
}

}  // namespace kvlab::engine

#include "engine/pass_costs.h"

#include <algorithm>

namespace kvlab::engine {

void PassCosts::observe(int decode_rows, int prefill_tokens, double ms) {
  if (prefill_tokens == 0) {
    if (decode_rows > 0) decode_ms_ = moved(decode_ms_, ms);
    return;
  }
  // A mixed pass: the prompt tokens' share is what the decode rows alone
  // would not have taken. Without a decode-only pass to compare, nothing.
  if (decode_rows > 0 && !decode_known()) return;
  const double prefill_ms = std::max(0.0, ms - (decode_rows > 0 ? decode_ms_ : 0.0));
  // Not zero: a pass timed at or under the decode estimate (noise) still
  // says a prompt token costs something.
  prefill_token_ms_ = moved(prefill_token_ms_, std::max(prefill_ms / prefill_tokens, 1e-6));
}

}  // namespace kvlab::engine

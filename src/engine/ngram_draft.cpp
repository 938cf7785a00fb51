#include "engine/ngram_draft.h"

#include <algorithm>

namespace kvlab::engine {

std::vector<int32_t> ngram_draft(std::span<const int32_t> history, int max_tokens, int ngram_max, int ngram_min) {
  const size_t n = history.size();
  if (max_tokens <= 0) return {};
  for (int len = std::min<int>(ngram_max, int(n) - 1); len >= std::max(1, std::min(ngram_min, ngram_max)); --len) {
    const auto suffix = history.last(size_t(len));
    // An occurrence ending at `end` (exclusive) is followed by history[end..];
    // the latest one first, not the suffix itself (end < n).
    for (size_t end = n - 1; end >= size_t(len); --end) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + ptrdiff_t(end) - len)) continue;
      const size_t take = std::min(size_t(max_tokens), n - end);
      return {history.begin() + ptrdiff_t(end), history.begin() + ptrdiff_t(end + take)};
    }
  }
  return {};
}

}  // namespace kvlab::engine

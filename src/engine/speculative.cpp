#include "engine/speculative.h"

namespace kvlab::engine {

std::vector<int32_t> accept_drafts(std::span<const int32_t> drafts,
                                   const std::function<std::optional<int32_t>(size_t j)>& draw) {
  std::vector<int32_t> drawn;
  for (size_t j = 0;; ++j) {
    const std::optional<int32_t> id = draw(j);
    if (!id) break;
    drawn.push_back(*id);
    if (j == drafts.size() || *id != drafts[j]) break;
  }
  return drawn;
}

}  // namespace kvlab::engine

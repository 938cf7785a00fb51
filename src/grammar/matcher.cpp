#include "grammar/matcher.h"

#include <algorithm>

namespace kvlab::grammar {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)), arena_(*grammar_) {
  arena_.start(stacks_);
}

bool Matcher::accept(std::string_view bytes) {
  std::vector<uint32_t> current = stacks_, next;
  Utf8Partial utf8 = utf8_;
  const uint32_t mark = arena_.size();
  for (char c : bytes) {
    if (!arena_.advance(current, utf8, uint8_t(c), next) || next.empty()) {
      arena_.truncate(mark);
      return false;
    }
    current.swap(next);
  }
  stacks_ = std::move(current);
  utf8_ = utf8;
  arena_.compact(stacks_);  // drop the frames no stack uses any more
  return true;
}

bool Matcher::can_end() const {
  return utf8_.left == 0 && std::find(stacks_.begin(), stacks_.end(), kAccepted) != stacks_.end();
}

bool Matcher::complete() const {
  return utf8_.left == 0 && std::all_of(stacks_.begin(), stacks_.end(), [](uint32_t s) { return s == kAccepted; });
}

}  // namespace kvlab::grammar

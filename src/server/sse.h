// Server-sent events framing as OpenAI streams use it.
#pragma once
#include <string>

namespace kvlab::server::sse {

inline std::string event(const std::string& data) { return "data: " + data + "\n\n"; }
inline std::string done() { return "data: [DONE]\n\n"; }

}  // namespace kvlab::server::sse

// The links between devices that tensor and pipeline parallelism send
// activations over: bandwidth per direction per device and the latency of one
// hop, each with the document it comes from. A catalog device names the link
// it uses by default (Hardware::link); `kvlab simulate --link` overrides it.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace kvlab::perf {

struct Link {
  std::string id;    // CLI spelling, e.g. "nvlink4"
  std::string name;  // "NVLink 4 (H100 SXM)"
  // Bytes/s one device sends (and, at the same time, receives): vendors
  // quote NVLink as the total of both directions, so this is half of it.
  double bytes_per_s = 0;
  // Seconds one step of a ring collective costs besides its bytes (a hop:
  // one device hands a chunk to the next and it is seen there).
  double hop_latency_s = 0;
  std::string source;
};

std::span<const Link> link_catalog();

// Case-insensitive; throws kvlab::Error listing the ids.
const Link& find_link(std::string_view id);

}  // namespace kvlab::perf

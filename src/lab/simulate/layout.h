// Tensor and pipeline parallelism on catalog devices (docs/perf-model.md,
// section 7): how a model splits over tp x pp devices.
//
// Tensor parallelism over N devices (Megatron-LM's split: Shoeybi et al.,
// "Megatron-LM", 2019, section 3) gives each device 1/N of the query heads,
// the MLP columns (each expert's in a mixture of experts, as vLLM's
// tensor-parallel MoE layers split them; the router stays whole) and the
// vocabulary; KV heads split while N <= n_kv_heads, beyond that each device
// keeps one and each KV head is replicated on N / n_kv_heads devices. It
// costs two all-reduces of the activations per layer (after attention's
// output projection and after the MLP's down projection). Pipeline
// parallelism over M stages gives each stage 1/M of the layers and hands the
// activations on M - 1 times; at batch 1 the stages run one after another
// (the pipeline bubble), so it relieves memory and never speeds a stream up.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "lab/hardware/hardware.h"
#include "lab/hardware/interconnect.h"
#include "model/config.h"

namespace kvlab::perf {

inline constexpr int kMaxDevices = 64;

struct Layout {
  int tp = 1;  // tensor-parallel devices per stage
  int pp = 1;  // pipeline stages
  std::optional<Link> link;  // set whenever devices() > 1
  int devices() const { return tp * pp; }
};

// The layout of tp x pp devices of `hw`, over the link named `link_id` or,
// when empty, the device's default link. Throws kvlab::Error when tp or pp is
// below 1 or above kMaxDevices, or several devices need a link the catalog
// does not give `hw` and none was named.
Layout make_layout(int tp, int pp, std::string_view link_id, const Hardware& hw);

// Why `c` does not split evenly over `l`, as engines require (query heads
// and MLP width, an expert's in a MoE, divisible by tp, KV heads divisible
// by tp or tp by KV heads, no more stages than layers); empty when it does.
std::string layout_problem(const model::Config& c, const Layout& l);
// Throws kvlab::Error with layout_problem() when there is one.
void check_layout(const model::Config& c, const Layout& l);

// One device's share of `c` over tp devices (see the header comment), with
// all of its layers: rounded up, the busiest device where a split is uneven.
model::Config tp_shard(const model::Config& c, int tp);

}  // namespace kvlab::perf

// Models the simulator knows by name, each a model::Config with the
// Hugging Face config.json it was copied from; plus any GGUF file (its
// metadata, through the engine's own loader) and any HF config.json.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "model/config.h"

namespace kvlab::perf {

struct ModelEntry {
  std::string_view id;  // CLI spelling, e.g. "llama-3.1-8b"
  model::Config config;
  std::string_view source;  // where the hyper-parameters come from
};

std::span<const ModelEntry> model_catalog();

struct ResolvedModel {
  std::string id;  // catalog id or the path given
  model::Config config;
  std::string source;
  // Average bits per weight stored in a GGUF file (tensor bytes · 8 / parameters);
  // absent for catalog entries and config.json, whose weight format is chosen
  // on the command line.
  std::optional<double> file_bits_per_weight;
  // The dtype of most of a GGUF file's layer-matrix bytes ("q4_k" in a
  // Q4_K_M file, whose layers also hold some q6_k): the kernels that do
  // most of a prompt's arithmetic.
  std::optional<std::string> file_layer_dtype;
};

// The weights a simulation or diagnosis prices `m` at: the `requested`
// format name, except "auto": a GGUF file at its own average bits per weight
// with its layers' main dtype (or, when that is no format the simulator
// knows, the format closest in size), anything else bf16.
struct PricedWeights {
  std::string format;
  std::optional<double> bits;  // set for a GGUF file's own average
};
PricedWeights priced_weights(const std::string& requested, const ResolvedModel& m);

// A catalog id (case-insensitive), a path ending in ".gguf", or a path to a
// Hugging Face config.json (any path ending in ".json"). Throws kvlab::Error.
ResolvedModel resolve_model(std::string_view name_or_path);

// Hugging Face config.json: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, vocab_size are required; num_key_value_heads, head_dim,
// rope_theta, rms_norm_eps, tie_word_embeddings, max_position_embeddings,
// model_type are optional, and so are a mixture of experts' num_local_experts
// or num_experts, num_experts_per_tok (then required), moe_intermediate_size
// and norm_topk_prob (model_type mixtral is llama with experts, qwen3_moe is
// qwen3moe). Errors name `origin` and the field.
model::Config parse_hf_config(std::string_view json_text, std::string_view origin);

// Throws kvlab::Error unless the dimensions are positive and consistent
// (heads divisible by KV heads).
void validate_config(const model::Config& c, std::string_view origin);

// How reports show a model's size and FFN: "46.7 B", with "(12.9 B active)"
// for a mixture of experts (param_count's active()); "14336", or "8 experts
// of 14336, 2 per token".
std::string describe_params(const model::Config& c);
std::string describe_ffn(const model::Config& c);

}  // namespace kvlab::perf

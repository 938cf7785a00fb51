#include "lab/simulate/model_catalog.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/parse_json.h"
#include "gguf/file.h"
#include "lab/cost/cost.h"
#include "lab/hardware/formats.h"
#include "lab/report/units.h"
#include "tensor/dtype.h"

namespace kvlab::perf {

namespace {

using model::Config;

Config make(const char* arch, const char* name, int layers, int embd, int ff, int heads, int kv_heads, int vocab,
            int ctx, float theta, float eps, bool tied) {
  Config c;
  c.arch = arch;
  model::apply_arch_traits(c);
  c.name = name;
  c.n_layer = layers;
  c.n_embd = embd;
  c.n_ff = ff;
  c.n_head = heads;
  c.n_head_kv = kv_heads;
  c.head_dim = embd / heads;
  c.n_vocab = vocab;
  c.n_ctx_train = ctx;
  c.rope_dim = c.head_dim;
  c.rope_theta = theta;
  c.rms_eps = eps;
  c.tied_embeddings = tied;
  return c;
}

// Gemma 3 1B: 256-wide heads (not hidden_size / heads), 5 local layers of
// 512 positions for each global one.
Config gemma3_1b() {
  Config c = make("gemma3", "Gemma-3-1B", 26, 1152, 6912, 4, 1, 262144, 32768, 1000000.f, 1e-6f, true);
  c.head_dim = c.rope_dim = 256;
  c.swa_window = 512;
  return c;
}

// Qwen3 (and Qwen3-MoE, arch qwen3moe): 128-wide heads, so q_dim = heads x
// 128 is not hidden_size (4096 of 4096 in the 8B, 2048 of 1024 in the 0.6B).
Config qwen3(const char* arch, const char* name, int layers, int embd, int ff, int heads, int kv_heads, bool tied) {
  Config c = make(arch, name, layers, embd, ff, heads, kv_heads, 151936, 40960, 1000000.f, 1e-6f, tied);
  c.head_dim = c.rope_dim = 128;
  return c;
}

// A mixture of experts: `experts` FFNs of `ff_exp` in every layer, `used`
// of them per token (num_local_experts or num_experts, num_experts_per_tok,
// moe_intermediate_size or intermediate_size). Both catalog MoEs
// renormalise the picked weights, as apply_arch_traits sets.
Config moe(Config c, int experts, int used, int ff_exp) {
  c.n_expert = experts;
  c.n_expert_used = used;
  c.n_ff_exp = ff_exp;
  return c;
}

// Values copied from each model's config.json on the Hugging Face Hub
// (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, vocab_size, max_position_embeddings,
// rope_theta, rms_norm_eps, tie_word_embeddings, sliding_window, and the
// experts' fields above).
const std::array<ModelEntry, 14>& catalog() {
  static const std::array<ModelEntry, 14> entries{{
      {"llama-3.1-8b", make("llama", "Llama-3.1-8B", 32, 4096, 14336, 32, 8, 128256, 131072, 500000.f, 1e-5f, false),
       "Hugging Face meta-llama/Llama-3.1-8B config.json"},
      {"llama-2-7b", make("llama", "Llama-2-7B", 32, 4096, 11008, 32, 32, 32000, 4096, 10000.f, 1e-5f, false),
       "Hugging Face meta-llama/Llama-2-7b-hf config.json"},
      {"mistral-7b", make("llama", "Mistral-7B-v0.1", 32, 4096, 14336, 32, 8, 32000, 32768, 10000.f, 1e-5f, false),
       "Hugging Face mistralai/Mistral-7B-v0.1 config.json (sliding window 4096 not modelled)"},
      {"qwen2.5-7b", make("qwen2", "Qwen2.5-7B", 28, 3584, 18944, 28, 4, 152064, 131072, 1000000.f, 1e-6f, false),
       "Hugging Face Qwen/Qwen2.5-7B config.json"},
      {"qwen2.5-0.5b", make("qwen2", "Qwen2.5-0.5B", 24, 896, 4864, 14, 2, 151936, 32768, 1000000.f, 1e-6f, true),
       "Hugging Face Qwen/Qwen2.5-0.5B config.json"},
      {"qwen3-8b", qwen3("qwen3", "Qwen3-8B", 36, 4096, 12288, 32, 8, false),
       "Hugging Face Qwen/Qwen3-8B config.json"},
      {"qwen3-0.6b", qwen3("qwen3", "Qwen3-0.6B", 28, 1024, 3072, 16, 8, true),
       "Hugging Face Qwen/Qwen3-0.6B config.json"},
      {"gemma-3-1b", gemma3_1b(), "Hugging Face google/gemma-3-1b-pt config.json"},
      {"llama-3.1-70b", make("llama", "Llama-3.1-70B", 80, 8192, 28672, 64, 8, 128256, 131072, 500000.f, 1e-5f, false),
       "Hugging Face meta-llama/Llama-3.1-70B config.json"},
      {"smollm2-135m", make("llama", "SmolLM2-135M", 30, 576, 1536, 9, 3, 49152, 8192, 100000.f, 1e-5f, true),
       "Hugging Face HuggingFaceTB/SmolLM2-135M config.json"},
      {"smollm2-360m", make("llama", "SmolLM2-360M", 32, 960, 2560, 15, 5, 49152, 8192, 100000.f, 1e-5f, true),
       "Hugging Face HuggingFaceTB/SmolLM2-360M config.json"},
      {"smollm2-1.7b", make("llama", "SmolLM2-1.7B", 24, 2048, 8192, 32, 32, 49152, 8192, 130000.f, 1e-5f, true),
       "Hugging Face HuggingFaceTB/SmolLM2-1.7B config.json"},
      {"mixtral-8x7b",
       moe(make("llama", "Mixtral-8x7B-v0.1", 32, 4096, 14336, 32, 8, 32000, 32768, 1000000.f, 1e-5f, false), 8, 2,
           14336),
       "Hugging Face mistralai/Mixtral-8x7B-v0.1 config.json"},
      {"qwen3-30b-a3b", moe(qwen3("qwen3moe", "Qwen3-30B-A3B", 48, 2048, 6144, 32, 4, false), 128, 8, 768),
       "Hugging Face Qwen/Qwen3-30B-A3B config.json"},
  }};
  return entries;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& ch : r) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using nlohmann::json;

[[noreturn]] void field_error(std::string_view origin, std::string_view field, std::string_view expected) {
  throw Error(std::string(origin) + ": field '" + std::string(field) + "' " + std::string(expected));
}

int required_int(const json& j, std::string_view origin, const char* key) {
  if (!j.contains(key)) field_error(origin, key, "missing (expected a positive integer)");
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0 || j[key].get<int64_t>() > (1 << 30))
    field_error(origin, key, "must be a positive integer");
  return j[key].get<int>();
}

// Optional keys may also be null in HF configs (e.g. "head_dim": null).
bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

bool optional_bool(const json& j, std::string_view origin, const char* key, bool fallback) {
  if (!present(j, key)) return fallback;
  if (!j[key].is_boolean()) field_error(origin, key, "must be true or false");
  return j[key].get<bool>();
}

// HF's model_type where kvlab's architecture (GGUF's general.architecture)
// is named otherwise: gemma3's text model, Mixtral (llama with experts),
// Qwen's and Granite's mixtures of experts.
std::string arch_of(const std::string& model_type) {
  if (model_type == "gemma3_text") return "gemma3";
  if (model_type == "mixtral") return "llama";
  if (model_type == "qwen3_moe") return "qwen3moe";
  if (model_type == "qwen2_moe") return "qwen2moe";
  if (model_type == "granitemoeshared") return "granitemoe";
  return model_type;
}

// A shared expert's width: Qwen2-MoE's shared_expert_intermediate_size
// (gated, as the qwen2moe traits say), GraniteMoeShared's
// shared_intermediate_size.
void read_hf_shared_expert(const json& j, std::string_view origin, Config& c) {
  for (const char* key : {"shared_expert_intermediate_size", "shared_intermediate_size"})
    if (present(j, key) && j[key] != 0) c.n_ff_shexp = required_int(j, origin, key);
}

// The experts of a MoE config.json, if it has any: num_local_experts
// (Mixtral) or num_experts (Qwen; absent or 0: dense), num_experts_per_tok,
// and each expert's width, moe_intermediate_size, else intermediate_size
// (Mixtral's is the expert's). norm_topk_prob defaults as the HF models do:
// Mixtral and Granite always renormalise the picked weights, Qwen and
// OLMoE only when told.
// Qwen's decoder_sparse_step and mlp_only_layers make some layers dense,
// which kvlab does not model: only their defaults (1, []) are accepted.
void read_hf_experts(const json& j, std::string_view origin, const std::string& model_type, Config& c) {
  const char* count = present(j, "num_local_experts") ? "num_local_experts" : "num_experts";
  if (!present(j, count) || j[count] == 0) return;
  c.n_expert = required_int(j, origin, count);
  c.n_expert_used = required_int(j, origin, "num_experts_per_tok");
  if (c.n_expert_used > c.n_expert)
    field_error(origin, "num_experts_per_tok",
                "must not exceed " + std::string(count) + " (" + std::to_string(c.n_expert) + ")");
  c.n_ff_exp = present(j, "moe_intermediate_size") ? required_int(j, origin, "moe_intermediate_size") : c.n_ff;
  const bool renormalises = model_type == "mixtral" || model_type.starts_with("granitemoe");
  c.expert_weights_norm = optional_bool(j, origin, "norm_topk_prob", renormalises);
  read_hf_shared_expert(j, origin, c);
  if (present(j, "decoder_sparse_step") && j["decoder_sparse_step"] != 1)
    field_error(origin, "decoder_sparse_step", "must be 1: dense layers between the experts' are not modelled");
  if (present(j, "mlp_only_layers") && j["mlp_only_layers"] != json::array())
    field_error(origin, "mlp_only_layers", "must be empty: dense layers among the experts' are not modelled");
}

// The dtype holding the most bytes among the layers' matrices ("blk.N.*",
// two or more dimensions): the embedding table and norms are left out, as a
// prompt's arithmetic runs in the layers.
std::optional<std::string> main_layer_dtype(const gguf::File& f) {
  std::map<std::string_view, uint64_t> bytes;
  for (const gguf::TensorInfo& t : f.tensors())
    if (t.name.starts_with("blk.") && t.dims.size() >= 2) bytes[tensor::dtype_info(t.dtype).name] += t.n_bytes;
  const auto most = std::max_element(bytes.begin(), bytes.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most == bytes.end()) return std::nullopt;
  return std::string(most->first);
}

}  // namespace

std::span<const ModelEntry> model_catalog() { return catalog(); }

void validate_config(const Config& c, std::string_view origin) {
  const std::string o(origin);
  if (c.n_layer <= 0 || c.n_embd <= 0 || c.n_ff <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0 ||
      c.n_vocab <= 0)
    throw Error(o + ": layer, width, head and vocabulary sizes must all be positive");
  if (c.n_head % c.n_head_kv != 0)
    throw Error(o + ": attention heads (" + std::to_string(c.n_head) + ") must be a multiple of KV heads (" +
                std::to_string(c.n_head_kv) + ")");
}

std::string describe_params(const Config& c) {
  const ParamCount n = param_count(c);
  const std::string total = fmt_num(n.total() / 1e9) + " B";
  return c.is_moe() ? total + " (" + fmt_num(n.active() / 1e9) + " B active)" : total;
}

std::string describe_ffn(const Config& c) {
  if (!c.is_moe()) return std::to_string(c.n_ff);
  std::string s = std::to_string(c.n_expert) + " experts of " + std::to_string(c.n_ff_exp) + ", " +
                  std::to_string(c.n_expert_used) + " per token" + (c.expert_weights_norm ? " (renormalised)" : "");
  if (c.n_ff_shexp > 0)
    s += std::string(", and a") + (c.shared_expert_gated ? " gated" : "") + " shared one of " + std::to_string(c.n_ff_shexp);
  return s;
}

Config parse_hf_config(std::string_view json_text, std::string_view origin) {
  const json j = parse_json(json_text, origin);
  if (!j.is_object()) throw Error(std::string(origin) + ": expected a JSON object");

  Config c;
  const std::string model_type =
      present(j, "model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "llama";
  c.arch = arch_of(model_type);
  if (present(j, "architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.name = j["architectures"][0].get<std::string>();
  c.n_embd = required_int(j, origin, "hidden_size");
  c.n_ff = required_int(j, origin, "intermediate_size");
  c.n_layer = required_int(j, origin, "num_hidden_layers");
  c.n_head = required_int(j, origin, "num_attention_heads");
  c.n_vocab = required_int(j, origin, "vocab_size");
  c.n_head_kv = present(j, "num_key_value_heads") ? required_int(j, origin, "num_key_value_heads") : c.n_head;
  if (present(j, "head_dim")) {
    c.head_dim = required_int(j, origin, "head_dim");
  } else {
    if (c.n_embd % c.n_head != 0)
      field_error(origin, "hidden_size", "must be divisible by num_attention_heads when head_dim is absent");
    c.head_dim = c.n_embd / c.n_head;
  }
  c.rope_dim = c.head_dim;
  if (present(j, "max_position_embeddings")) c.n_ctx_train = required_int(j, origin, "max_position_embeddings");
  if (present(j, "rope_theta")) {
    if (!j["rope_theta"].is_number() || !(j["rope_theta"].get<double>() > 0))
      field_error(origin, "rope_theta", "must be a positive number");
    c.rope_theta = j["rope_theta"].get<float>();
  }
  if (present(j, "rms_norm_eps")) {
    if (!j["rms_norm_eps"].is_number() || !(j["rms_norm_eps"].get<double>() > 0))
      field_error(origin, "rms_norm_eps", "must be a positive number");
    c.rms_eps = j["rms_norm_eps"].get<float>();
  }
  c.tied_embeddings = optional_bool(j, origin, "tie_word_embeddings", c.tied_embeddings);
  // The traits of the architectures kvlab runs; of the others, those that
  // pair rotary dimensions (i, i + d/2).
  if (!model::apply_arch_traits(c) && (c.arch == "gemma" || c.arch == "gpt_neox"))
    c.rope_order = model::RopeOrder::NeoX;
  if (c.swa_pattern > 0 && present(j, "sliding_window")) c.swa_window = required_int(j, origin, "sliding_window");
  read_hf_experts(j, origin, model_type, c);  // after the traits, whose expert_weights_norm it overrides
  validate_config(c, origin);
  return c;
}

ResolvedModel resolve_model(std::string_view name_or_path) {
  const std::string key = lower(name_or_path);
  for (const ModelEntry& e : catalog())
    if (e.id == key) return {std::string(e.id), e.config, std::string(e.source), std::nullopt, std::nullopt};

  const std::string path(name_or_path);
  if (ends_with(key, ".gguf")) {
    const gguf::File f = gguf::File::open(path);
    ResolvedModel r{path, model::load_config(f), "GGUF metadata of " + path, std::nullopt, std::nullopt};
    validate_config(r.config, path);
    // Tensor bytes, not the file size: the vocabulary and other metadata of a
    // tiny model outweigh its weights (stories260K's f32 file is 32.4 bits
    // per parameter).
    double tensor_bytes = 0;
    for (const gguf::TensorInfo& t : f.tensors()) tensor_bytes += double(t.n_bytes);
    r.file_bits_per_weight = 8.0 * tensor_bytes / param_count(r.config).total();
    r.file_layer_dtype = main_layer_dtype(f);
    return r;
  }
  if (ends_with(key, ".json"))
    return {path, parse_hf_config(read_text(path), path), "config.json at " + path, std::nullopt, std::nullopt};

  std::string ids;
  for (const ModelEntry& e : catalog()) ids += std::string(e.id) + ", ";
  throw Error("unknown model '" + path + "' (expected one of: " + ids + "a .gguf file or a config.json)");
}

PricedWeights priced_weights(const std::string& requested, const ResolvedModel& m) {
  if (requested != "auto") return {requested, std::nullopt};
  if (!m.file_bits_per_weight) return {"bf16", std::nullopt};
  const bool known = m.file_layer_dtype && std::any_of(number_formats().begin(), number_formats().end(),
                                                       [&](const NumberFormat& f) { return f.name == *m.file_layer_dtype; });
  return {known ? *m.file_layer_dtype : std::string(nearest_weight_format(*m.file_bits_per_weight).name),
          m.file_bits_per_weight};
}

}  // namespace kvlab::perf

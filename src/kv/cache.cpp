#include "kv/cache.h"

#include <string>

#include "common/error.h"

namespace kvlab::kv {

Cache::Cache(const model::Config& cfg, int n_ctx, int n_seq, tensor::DType type)
    : n_layer_(cfg.n_layer), n_ctx_(n_ctx), n_seq_(n_seq), kv_dim_(size_t(cfg.kv_dim())), type_(type) {
  if (type != tensor::DType::F32 && type != tensor::DType::F16 && type != tensor::DType::Q8_0)
    throw Error("KV cache type must be f32, f16 or q8_0, got " + std::string(tensor::dtype_info(type).name));
  if (n_ctx < 1 || n_seq < 1) throw Error("KV cache needs a context and a sequence count >= 1");
  const auto head = tensor::row_bytes(type, uint64_t(cfg.head_dim));
  if (!head)
    throw Error("KV cache type " + std::string(tensor::dtype_info(type).name) + " needs a head size that is a multiple of " +
                std::to_string(tensor::dtype_info(type).block_size) + " (this model: " + std::to_string(cfg.head_dim) + ")");
  head_bytes_ = *head;
  row_bytes_ = head_bytes_ * size_t(cfg.n_head_kv);
  const double total = double(n_layer_) * n_seq * n_ctx * double(row_bytes()) * 2;
  if (total > 64.0 * (1ull << 30))
    throw Error("KV cache of " + std::to_string(uint64_t(total / (1 << 20))) + " MiB is too large; lower -c");
  const size_t per = size_t(n_layer_) * n_seq * n_ctx * row_bytes();
  k_.resize(per);
  v_.resize(per);
  used_.assign(size_t(n_seq), 0);
}

void Cache::store(uint8_t* dst, const float* src) const {
  tensor::dtype_info(type_).quantize(src, dst, kv_dim_);
}

}  // namespace kvlab::kv

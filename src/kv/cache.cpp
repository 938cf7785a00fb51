#include "kv/cache.h"

#include <string>

#include "common/error.h"

namespace kvlab::kv {

Cache::Cache(const model::Config& cfg, int n_ctx, int n_seq, tensor::DType type)
    : n_layer_(cfg.n_layer), n_ctx_(n_ctx), n_seq_(n_seq), kv_dim_(size_t(cfg.kv_dim())), type_(type) {
  if (type != tensor::DType::F32 && type != tensor::DType::F16)
    throw Error("KV cache type must be f32 or f16, got " + std::string(tensor::dtype_info(type).name));
  if (n_ctx < 1 || n_seq < 1) throw Error("KV cache needs a context and a sequence count >= 1");
  elem_bytes_ = tensor::dtype_info(type).block_bytes;
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

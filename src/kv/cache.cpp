#include "kv/cache.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "kernels/dot.h"

namespace kvlab::kv {

Cache::Cache(const model::Config& cfg, int n_ctx, int n_seq, tensor::DType type)
    : Cache(cfg, n_ctx, n_seq, type, n_seq * blocks_for(std::max(n_ctx, 1))) {
  for (int s = 0; s < n_seq_; ++s)
    for (int b = 0; b < blocks_per_seq_; ++b) map_block(s, b, s * blocks_per_seq_ + b);
}

Cache::Cache(const model::Config& cfg, int n_ctx, int n_seq, tensor::DType type, int n_blocks)
    : n_layer_(cfg.n_layer),
      n_head_kv_(cfg.n_head_kv),
      n_ctx_(n_ctx),
      n_seq_(n_seq),
      n_blocks_(n_blocks),
      blocks_per_seq_(blocks_for(n_ctx)),
      kv_dim_(size_t(cfg.kv_dim())),
      head_dim_(size_t(cfg.head_dim)),
      type_(type) {
  if (type != tensor::DType::F32 && type != tensor::DType::F16 && type != tensor::DType::Q8_0)
    throw Error("KV cache type must be f32, f16 or q8_0, got " + std::string(tensor::dtype_info(type).name));
  if (n_ctx < 1 || n_seq < 1 || n_blocks < 1) throw Error("KV cache needs a context, sequences and blocks >= 1");
  const auto head = tensor::row_bytes(type, uint64_t(cfg.head_dim));
  if (!head)
    throw Error("KV cache type " + std::string(tensor::dtype_info(type).name) + " needs a head size that is a multiple of " +
                std::to_string(tensor::dtype_info(type).block_size) + " (this model: " + std::to_string(cfg.head_dim) + ")");
  head_bytes_ = *head;
  row_bytes_ = head_bytes_ * size_t(cfg.n_head_kv);
  const double total = double(n_layer_) * double(n_blocks) * double(kBlockTokens) * double(row_bytes_) * 2;
  if (total > 64.0 * (1ull << 30))
    throw Error("KV cache of " + std::to_string(uint64_t(total / (1 << 20))) + " MiB is too large; lower -c");
  k_.resize(region(n_layer_, 0));
  v_.resize(region(n_layer_, 0));
  table_.assign(size_t(n_seq) * size_t(blocks_per_seq_), -1);
  used_.assign(size_t(n_seq), 0);
}

void Cache::unmap(int seq) {
  std::fill_n(table_.begin() + std::ptrdiff_t(size_t(seq) * size_t(blocks_per_seq_)), blocks_per_seq_, -1);
  used_[size_t(seq)] = 0;
}

// The KV types are activation formats too (f32, f16, q8_0), so the active
// ISA's activation converter writes them: the same bytes as the scalar
// codec, without its per-element f16 rounding in software (~2% of a decode
// step in perf).
void Cache::store(uint8_t* dst, const float* src) const {
  kernels::dot_kernel(type_).quantize_act(src, dst, head_dim_);
}

}  // namespace kvlab::kv

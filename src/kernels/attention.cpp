#include "kernels/attention.h"

#include <algorithm>

#include "common/error.h"
#include "kernels/dot.h"
#include "kernels/ops.h"
#include "tensor/blocks.h"
#include "tensor/half.h"

namespace kvlab::kernels {

namespace scalar {
namespace {
void axpy_f32(float a, const void* row, float* y, size_t n) {
  auto* x = static_cast<const float*>(row);
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}
void axpy_f16(float a, const void* row, float* y, size_t n) {
  auto* x = static_cast<const uint16_t*>(row);
  for (size_t i = 0; i < n; ++i) y[i] += a * tensor::f16_to_f32(x[i]);
}
void axpy_q8_0(float a, const void* row, float* y, size_t n) {
  auto* b = static_cast<const tensor::BlockQ8_0*>(row);
  for (size_t i = 0; i < n / tensor::kQK; ++i) {
    const float ad = a * tensor::f16_to_f32(b[i].d);
    for (int j = 0; j < tensor::kQK; ++j) y[i * tensor::kQK + size_t(j)] += ad * float(b[i].qs[j]);
  }
}
}  // namespace
AxpyFn find_axpy(tensor::DType t) {
  if (t == tensor::DType::F32) return axpy_f32;
  if (t == tensor::DType::F16) return axpy_f16;
  if (t == tensor::DType::Q8_0) return axpy_q8_0;
  return nullptr;
}
}  // namespace scalar

AxpyFn axpy_kernel(tensor::DType t) {
  AxpyFn f = active_isa() != Isa::Scalar ? avx2::find_axpy(t) : nullptr;
  if (!f) f = scalar::find_axpy(t);
  if (!f) throw Error("no attention kernel for KV type " + std::string(tensor::dtype_info(t).name));
  return f;
}

void attend(const float* q, const KvView& kv, int n_pos, size_t head_dim, float scale, void* q_conv,
            float* scores, float* out) {
  // q meets K in K's own format (f16 K: q rounded to f16), as the matmul
  // kernels pair activations with weights.
  const DotKernel& dk = dot_kernel(kv.type);
  dk.quantize_act(q, q_conv, head_dim);
  const int run = kv.blocks ? kv.block_tokens : n_pos;  // rows stored one after another
  auto block_offset = [&](int first) { return kv.blocks ? size_t(kv.blocks[first / run]) * kv.block_stride : 0; };
  for (int b = 0; b < n_pos; b += run) {
    const uint8_t* k = kv.k + block_offset(b);
    for (int j = b; j < std::min(n_pos, b + run); ++j, k += kv.row_stride)
      scores[j] = dk.dot(k, q_conv, head_dim) * scale;
  }
  softmax(scores, size_t(n_pos));
  const AxpyFn axpy = axpy_kernel(kv.type);
  for (size_t d = 0; d < head_dim; ++d) out[d] = 0.f;
  for (int b = 0; b < n_pos; b += run) {
    const uint8_t* v = kv.v + block_offset(b);
    for (int j = b; j < std::min(n_pos, b + run); ++j, v += kv.row_stride) axpy(scores[j], v, out, head_dim);
  }
}

}  // namespace kvlab::kernels

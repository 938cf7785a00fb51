// Number formats the simulator prices: how many bits a weight or a cached K/V
// element takes, and which precision the matmuls then run in. A superset of the
// engine's dtypes (tensor/dtype.h): fp8 and int8 exist on catalog hardware even
// where kvlab has no kernel for them.
#pragma once
#include <span>
#include <string_view>

namespace kvlab::perf {

// The precisions hardware datasheets quote a peak for. BF16 is 16-bit
// inputs with FP32 accumulation; FP16 is fp16 inputs as engines that
// accumulate in fp16 run them (llama.cpp's cuBLAS path), which GeForce cards
// execute at twice the FP32-accumulate rate (NVIDIA Ampere GA102 and Ada
// whitepapers); elsewhere it has no separate figure and falls back to BF16.
enum class Precision { FP32, TF32, BF16, FP16, FP8, INT8 };
std::string_view precision_name(Precision p);

struct NumberFormat {
  std::string_view name;  // CLI spelling
  double bits;            // storage bits per element, block scales included
  // Precision the matmuls run in with weights in this format. Weight-only
  // quantized formats (int8, q8_0, q4_x) are dequantized on the fly and
  // multiplied in 16-bit, as GPU weight-only kernels and llama.cpp's large-batch
  // path do: ggml's blocks to fp16 (llama.cpp's cuBLAS path), int8 to bf16
  // (gpt-fast); the hardware falls back to FP32 where it has no 16-bit rate.
  Precision compute;
  bool for_kv;  // also offered as a KV cache format
  // Integer codes with scales (int8, q8_0, q4_x): on a CPU the engines
  // multiply them by 8-bit-quantized activations in integer dot products
  // (perf::dense_precision).
  bool integer;
  std::string_view note;
  double bytes() const { return bits / 8.0; }
};

std::span<const NumberFormat> number_formats();
// Throws kvlab::Error listing the accepted names.
const NumberFormat& weight_format(std::string_view name);
const NumberFormat& kv_format(std::string_view name);
// The named weight format closest in size to `bits` per weight (e.g. a GGUF
// file's average), whose compute precision then prices it.
const NumberFormat& nearest_weight_format(double bits);
Precision parse_precision(std::string_view name);  // "fp32", "tf32", "bf16", "fp16", "fp8", "int8"

}  // namespace kvlab::perf

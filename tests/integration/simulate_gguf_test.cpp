// `kvlab simulate -m FILE.gguf` on the real models: the weights are priced
// as the file stores its layers, not as the format nearest its average size.
#include <gtest/gtest.h>

#include "common/models.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::perf {
namespace {

TEST(SimulateGguf, PricesTheLayersMainDtypeAtTheFilesOwnBits) {
  // SmolLM2's layers are all q4_1; its q8_0 embedding table lifts the
  // file's average to 5.74 bits.
  const ResolvedModel smol = resolve_model(test::kDefaultModel);
  EXPECT_EQ(smol.file_layer_dtype, "q4_1");
  EXPECT_EQ(priced_weights("auto", smol).format, "q4_1");
  EXPECT_NEAR(*priced_weights("auto", smol).bits, 5.74, 0.01);
  // Gemma 3 270M Q4_K_M: 41.6 MiB of q5_0 layer matrices against 12.7 of
  // q4_k and 9.2 of q6_k; its 171 MiB q8_0 table makes the average 7.4 bits,
  // which the nearest-size rule priced as fp8.
  const ResolvedModel gemma = resolve_model(test::kGemma3);
  EXPECT_EQ(gemma.file_layer_dtype, "q5_0");
  EXPECT_EQ(priced_weights("auto", gemma).format, "q5_0");
  EXPECT_GT(*priced_weights("auto", gemma).bits, 7.0);
}

}  // namespace
}  // namespace kvlab::perf

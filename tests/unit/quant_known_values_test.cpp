// kvlab's decoders against llama.cpp's: blocks that llama.cpp's quantizer
// wrote, with the values gguf-py (llama.cpp's own Python package) decodes
// them to. Made by tests/golden/gen_quant_blocks.py; see its docstring.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/models.h"
#include "tensor/dtype.h"

namespace kvlab::tensor {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

TEST(QuantKnownValues, DecodersMatchLlamaCpp) {
  const nlohmann::json j = test::read_json(test::kGoldenDir + "/quant_blocks.json");
  ASSERT_EQ(j["blocks"].size(), 5u);
  for (const auto& [type, blk] : j["blocks"].items()) {
    std::string name = type;
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    const auto t = parse_dtype(name);
    ASSERT_TRUE(t) << type;
    const DTypeInfo& info = dtype_info(*t);
    const std::vector<uint8_t> bytes = from_hex(blk["bytes_hex"]);
    const auto want = blk["values"].get<std::vector<float>>();
    ASSERT_EQ(bytes.size(), want.size() / info.block_size * info.block_bytes) << type;
    std::vector<float> got(want.size());
    info.dequantize(bytes.data(), got.data(), got.size());
    // Both sides compute d*scale*q - dmin*min in f32; gguf-py may group the
    // products differently, so allow an ulp or two of the value's magnitude.
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 4e-7 * std::fabs(want[i]) + 1e-9) << type << " weight " << i;
  }
}

}  // namespace
}  // namespace kvlab::tensor

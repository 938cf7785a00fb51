// kvlab quantize (gguf::convert_file): every matrix re-encoded, rows that are
// not whole blocks of a K-quant written in its fallback format, and the
// re-encoded model still the same network (logits close to the source's).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "common/error.h"
#include "common/scratch_dir.h"
#include "common/tiny_model.h"
#include "engine/session.h"
#include "gguf/convert.h"
#include "gguf/file.h"
#include "model/model.h"

namespace kvlab {
namespace {

using tensor::DType;

// A random f32 model 256 wide (whole K-quant super-blocks) with FFN width n_ff.
std::string write_tiny(const test::ScratchDir& dir, int n_ff) {
  test::TinySpec s;
  s.n_embd = 256;
  s.n_ff = n_ff;
  const auto bytes = test::tiny_llama(s).serialize();
  const std::string path = dir.file("src.gguf");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

std::vector<float> first_logits(const std::string& path) {
  const auto m = model::Model::load(path);
  engine::SessionOptions o;
  o.n_ctx = 32;
  o.n_threads = 2;
  engine::Session s(*m, o);
  const auto l = s.prefill(std::vector<int32_t>{1, 7, 3, 12, 5});
  return {l.begin(), l.end()};
}

double logit_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) err2 += double(got[i] - ref[i]) * (got[i] - ref[i]), ref2 += double(ref[i]) * ref[i];
  return std::sqrt(err2 / ref2);
}

// n_ff 320: ffn_down's rows (320 wide) are not whole 256-blocks, every other
// matrix's (256 wide) are.
TEST(Quantize, KQuantsFallBackWhereRowsAreNotWholeBlocks) {
  const test::ScratchDir dir;
  const std::string src = write_tiny(dir, 320);
  for (const auto& [target, fallback] : std::map<DType, DType>{
           {DType::Q4_K, DType::Q5_0}, {DType::Q5_K, DType::Q5_1}, {DType::Q6_K, DType::Q8_0}}) {
    const std::string name(tensor::dtype_info(target).name);
    const std::string out = dir.file(name + ".gguf");
    const auto st = gguf::convert_file(gguf::File::open(src), out, target);
    EXPECT_EQ(st.fallback, uint64_t(test::TinySpec{}.n_layer)) << name;  // one ffn_down per layer
    const gguf::File written = gguf::File::open(out);
    for (const auto& t : written.tensors()) {
      const DType want = t.dims.size() < 2 ? DType::F32 : t.name.find("ffn_down") != std::string::npos ? fallback : target;
      EXPECT_EQ(t.dtype, want) << name << " " << t.name;
    }
  }
}

// The re-encoded model is the same network: its logits are within what its
// bits per weight allow of the f32 source's (relative RMS; a wrong bit
// layout gives ~1). One prompt through a random network is a noisy measure
// of quality, so the ranking of formats is tested on weights instead
// (Codecs.KQuantRoundTripBeatsLegacyBlocksOfTheirSize).
TEST(Quantize, ReencodedModelIsTheSameNetwork) {
  const test::ScratchDir dir;
  const std::string src = write_tiny(dir, 512);
  const std::vector<float> ref = first_logits(src);
  std::map<DType, double> err;
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::Q5_1, DType::Q5_K, DType::Q6_K, DType::Q8_0}) {
    const std::string name(tensor::dtype_info(t).name);
    const std::string out = dir.file(name + ".gguf");
    EXPECT_EQ(gguf::convert_file(gguf::File::open(src), out, t).fallback, 0u);
    err[t] = logit_error(first_logits(out), ref);
    std::printf("  %s: logits %.4f relative RMS from the f32 source\n", name.c_str(), err[t]);
    const double bits = tensor::dtype_info(t).bits_per_weight();
    EXPECT_LT(err[t], bits <= 5 ? 0.25 : bits <= 6 ? 0.15 : bits < 8 ? 0.1 : 0.03) << name;
  }
}

TEST(Quantize, NoFallbackIsAnError) {
  const test::ScratchDir dir;
  const std::string src = write_tiny(dir, 80);  // ffn_down rows of 80: not whole 32-blocks
  try {
    gguf::convert_file(gguf::File::open(src), dir.file("out.gguf"), DType::Q4_0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows of 80 cannot be stored as q4_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvlab

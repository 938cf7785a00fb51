// The GGUF reader against well-formed files, every kind of malformed file the
// engine issue lists, and every truncation of a small valid file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/scratch_dir.h"
#include "common/arch_graft.h"
#include "common/tiny_model.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvlab {
namespace {

using gguf::File;

std::vector<uint8_t> small_file() {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("some.u32", 7);
  w.set_f32("some.f32", 0.5f);
  w.set_bool("some.bool", true);
  w.set_string_array("some.strings", {"a", "bc", ""});
  w.set_i32_array("some.ints", {-1, 2, 3});
  std::vector<float> t(64, 1.5f);
  w.add_tensor("t0", {32, 2}, tensor::DType::F32, {reinterpret_cast<const uint8_t*>(t.data()), 256});
  w.add_tensor("t1", {64}, tensor::DType::F32, {reinterpret_cast<const uint8_t*>(t.data()), 256});
  return w.serialize();
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    File::parse(bytes, "x.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Offset of the first tensor-table entry's dtype/offset fields in small_file().
size_t find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  return size_t(it - b.begin());
}

TEST(Gguf, ReadsMetadataOfEveryKindAndTensors) {
  const auto bytes = small_file();
  File f = File::parse(bytes, "x.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.require_string("general.architecture"), "llama");
  EXPECT_EQ(f.require_int("some.u32"), 7);
  EXPECT_FLOAT_EQ(float(f.require_float("some.f32")), 0.5f);
  EXPECT_EQ(f.get_bool("some.bool"), true);
  EXPECT_EQ(*f.get_string_array("some.strings"), (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(*f.get_int_array("some.ints"), (std::vector<int64_t>{-1, 2, 3}));
  ASSERT_EQ(f.tensors().size(), 2u);
  const auto& t0 = f.require_tensor("t0", {32, 2});
  EXPECT_EQ(t0.n_bytes, 256u);
  float v;
  std::memcpy(&v, t0.data, 4);
  EXPECT_EQ(v, 1.5f);
  EXPECT_EQ(size_t(t0.data - f.tensors()[0].data + 0) % 32, 0u);
}

TEST(Gguf, WrongKeyTypesAreNamed) {
  File f = File::parse(small_file(), "x.gguf");
  EXPECT_THROW(f.require_int("general.architecture"), Error);
  try {
    f.get_string_array("some.ints");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "x.gguf: key 'some.ints' is an array of i32, expected an array of strings");
  }
  try {
    f.require_int("missing.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "x.gguf: missing required key 'missing.key'");
  }
}

TEST(Gguf, BadMagic) {
  auto b = small_file();
  b[0] = 'X';
  EXPECT_EQ(error_of(b), "x.gguf: bad magic: not a GGUF file");
}

TEST(Gguf, UnsupportedVersion) {
  for (uint32_t v : {1u, 4u, 0xffffffffu}) {
    auto b = small_file();
    std::memcpy(&b[4], &v, 4);
    EXPECT_EQ(error_of(b), "x.gguf: unsupported GGUF version " + std::to_string(v) + " (supported: 2, 3)");
  }
}

TEST(Gguf, Version2IsAccepted) {
  gguf::Writer w;
  w.set_version(2);
  w.set_u32("k", 1);
  EXPECT_EQ(File::parse(w.serialize(), "v2").version(), 2u);
}

TEST(Gguf, EveryTruncationIsAnErrorNeverACrash) {
  const auto b = small_file();
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + ptrdiff_t(n));
    const std::string e = error_of(cut);
    ASSERT_FALSE(e.empty()) << "prefix of " << n << " bytes was accepted";
    EXPECT_EQ(e.rfind("x.gguf: ", 0), 0u);
  }
}

TEST(Gguf, TruncatedDataNamesTheTensor) {
  auto b = small_file();
  b.resize(b.size() - 10);
  EXPECT_NE(error_of(b).find("tensor 't1' data"), std::string::npos) << error_of(b);
  EXPECT_NE(error_of(b).find("outside the file"), std::string::npos);
}

// What follows the 24-byte header (magic, version, the two counts) must have
// room for each count's smallest entries.
std::string count_error(const char* what, uint64_t n, int min_bytes, size_t file_size) {
  return "x.gguf: " + std::string(what) + " " + std::to_string(n) + " needs at least " + std::to_string(min_bytes) +
         " bytes each, only " + std::to_string(file_size - 24) + " left (truncated or corrupt file)";
}

TEST(Gguf, CountsTheFileCannotHold) {
  auto b = small_file();
  const uint64_t huge = 1ull << 60;
  std::memcpy(&b[8], &huge, 8);  // tensor count
  EXPECT_EQ(error_of(b), count_error("tensor count", huge, 24, b.size()));
  b = small_file();
  std::memcpy(&b[16], &huge, 8);  // metadata count
  EXPECT_EQ(error_of(b), count_error("metadata count", huge, 13, b.size()));
}

TEST(Gguf, RealCountsInACutOffFileSayTruncated) {
  // A download cut after 40 bytes keeps its true counts (6 keys, 2 tensors):
  // 16 bytes cannot hold 6 keys.
  auto b = small_file();
  b.resize(40);
  EXPECT_EQ(error_of(b), count_error("metadata count", 6, 13, b.size()));
}

TEST(Gguf, AbsurdStringLength) {
  auto b = small_file();
  const uint64_t huge = 1ull << 40;
  std::memcpy(&b[24], &huge, 8);  // length of the first key
  EXPECT_EQ(error_of(b), "x.gguf: metadata key has absurd length " + std::to_string(huge));
  b = small_file();
  // Length of the first string value ("llama"): right after its key and type.
  const size_t at = find(b, "general.architecture") + 20 + 4;
  std::memcpy(&b[at], &huge, 8);
  EXPECT_NE(error_of(b).find("string value"), std::string::npos) << error_of(b);
}

TEST(Gguf, ArrayLengthTheFileCannotHold) {
  auto b = small_file();
  const size_t at = find(b, "some.ints") + 9 + 4 + 4;  // key, value type, element type
  const uint64_t huge = 1ull << 61;
  std::memcpy(&b[at], &huge, 8);
  EXPECT_NE(error_of(b).find("x.gguf: i32 array length " + std::to_string(huge) + " needs at least 4 bytes each"),
            std::string::npos)
      << error_of(b);
}

TEST(Gguf, UnknownValueType) {
  auto b = small_file();
  const size_t at = find(b, "some.u32") + 8;
  const uint32_t bad = 99;
  std::memcpy(&b[at], &bad, 4);
  EXPECT_EQ(error_of(b), "x.gguf: key 'some.u32' has unknown value type 99");
}

// The table entry of tensor `name`: name, n_dims, dims, dtype, offset.
struct Entry {
  size_t n_dims, dims, dtype, offset;
};
Entry entry(const std::vector<uint8_t>& b, const std::string& name, size_t n_dims) {
  const size_t at = find(b, name) + name.size();
  return {at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

TEST(Gguf, UnknownDtype) {
  auto b = small_file();
  const uint32_t bad = 11;  // Q3_K: a real GGML type kvlab does not support
  std::memcpy(&b[entry(b, "t0", 2).dtype], &bad, 4);
  EXPECT_EQ(error_of(b), "x.gguf: tensor 't0' has unknown or unsupported dtype 11");
}

TEST(Gguf, ShapeThatDoesNotMatchTheBlockSize) {
  gguf::Writer w;
  std::vector<uint8_t> q(34, 0);  // one Q8_0 block
  w.add_tensor("q", {32}, tensor::DType::Q8_0, q);
  auto b = w.serialize();
  const uint64_t bad = 33;
  std::memcpy(&b[entry(b, "q", 1).dims], &bad, 8);
  EXPECT_EQ(error_of(b), "x.gguf: tensor 'q' row length 33 is not a multiple of the q8_0 block size 32");
}

TEST(Gguf, AbsurdShapeAndDims) {
  auto b = small_file();
  const uint32_t five = 5;
  std::memcpy(&b[entry(b, "t0", 2).n_dims], &five, 4);
  EXPECT_EQ(error_of(b), "x.gguf: tensor 't0' has 5 dims (expected 1..4)");
  b = small_file();
  const uint64_t zero = 0;
  std::memcpy(&b[entry(b, "t0", 2).dims], &zero, 8);
  EXPECT_NE(error_of(b).find("absurd shape"), std::string::npos);
}

TEST(Gguf, DataOutsideTheFile) {
  auto b = small_file();
  const uint64_t far = 1ull << 32;
  std::memcpy(&b[entry(b, "t1", 1).offset], &far, 8);
  EXPECT_NE(error_of(b).find("tensor 't1' data [4294967296, +256) lies outside the file"), std::string::npos)
      << error_of(b);
}

TEST(Gguf, OverlappingTensors) {
  auto b = small_file();
  const uint64_t zero = 0;
  std::memcpy(&b[entry(b, "t1", 1).offset], &zero, 8);  // t1 on top of t0
  EXPECT_EQ(error_of(b), "x.gguf: tensors 't0' and 't1' overlap");
}

TEST(Gguf, MisalignedOffset) {
  auto b = small_file();
  const uint64_t odd = 260;
  std::memcpy(&b[entry(b, "t1", 1).offset], &odd, 8);
  EXPECT_EQ(error_of(b), "x.gguf: tensor 't1' offset 260 is not aligned to 32");
}

TEST(Gguf, DuplicateKeyAndTensor) {
  gguf::Writer w;
  w.set_u32("k", 1);
  w.set_u32("k", 2);
  EXPECT_EQ(error_of(w.serialize()), "x.gguf: duplicate metadata key 'k'");
  gguf::Writer t;
  std::vector<uint8_t> d(128, 0);
  t.add_tensor("a", {32}, tensor::DType::F32, d);
  t.add_tensor("a", {32}, tensor::DType::F32, d);
  EXPECT_EQ(error_of(t.serialize()), "x.gguf: duplicate tensor name 'a'");
}

TEST(Gguf, BadAlignmentKey) {
  gguf::Writer w;
  w.set_u32("general.alignment", 24);
  EXPECT_EQ(error_of(w.serialize()), "x.gguf: general.alignment must be a power-of-two u32, got 24");
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A resident file holds the same bytes as a mapped one and rejects a bad
// file with the same one-line error.
TEST(Gguf, ResidentCopyEqualsMappedFile) {
  test::ScratchDir dir;
  const auto bytes = small_file();
  write_file(dir.file("ok.gguf"), bytes);
  const File mapped = File::open(dir.file("ok.gguf"), gguf::Residency::Mapped);
  const File resident = File::open(dir.file("ok.gguf"), gguf::Residency::Resident);
  ASSERT_EQ(resident.tensors().size(), mapped.tensors().size());
  for (size_t i = 0; i < mapped.tensors().size(); ++i) {
    const auto& a = mapped.tensors()[i];
    const auto& b = resident.tensors()[i];
    EXPECT_NE(a.data, b.data);
    ASSERT_EQ(a.n_bytes, b.n_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0);
  }
  File moved = File::open(dir.file("ok.gguf"), gguf::Residency::Resident);
  File target = std::move(moved);  // the copy changes hands and is freed once
  EXPECT_EQ(target.require_int("some.u32"), 7);

  write_file(dir.file("short.gguf"), {bytes.begin(), bytes.begin() + 40});
  for (auto r : {gguf::Residency::Mapped, gguf::Residency::Resident}) {
    try {
      File::open(dir.file("short.gguf"), r);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), dir.file("short.gguf") + ": " + error_of({bytes.begin(), bytes.begin() + 40}).substr(8));
    }
  }
}

TEST(Gguf, MissingFileIsOneLine) {
  try {
    File::open("/nonexistent/m.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/m.gguf: cannot open: No such file or directory");
  }
}

// Model-level validation: a structurally valid GGUF that is not a usable model.
std::string model_error(gguf::Writer& w) {
  const auto bytes = w.serialize();
  try {
    File f = File::parse(bytes, "m.gguf");
    const auto cfg = model::load_config(f);
    model::bind_weights(f, cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// `g` rewritten without the metadata keys and tensors named in `drop`.
gguf::Writer without(const File& g, const std::vector<std::string>& drop) {
  auto dropped = [&](const std::string& name) { return std::find(drop.begin(), drop.end(), name) != drop.end(); };
  gguf::Writer w;
  for (const auto& [key, value] : g.metadata())
    if (!dropped(key)) w.copy_value(key, value);
  for (const gguf::TensorInfo& t : g.tensors())
    if (!dropped(t.name)) w.add_tensor(t.name, t.dims, t.dtype, {t.data, size_t(t.n_bytes)});
  return w;
}

TEST(GgufModel, TinyModelIsValid) {
  auto w = test::tiny_llama({});
  EXPECT_EQ(model_error(w), "");
}

TEST(GgufModel, MissingRequiredKey) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  EXPECT_EQ(model_error(w), "m.gguf: missing required key 'llama.block_count'");
}

TEST(GgufModel, UnsupportedArchitecture) {
  gguf::Writer w;
  w.set_string("general.architecture", "mamba");
  EXPECT_EQ(model_error(w), "m.gguf: unsupported architecture 'mamba' (supported: llama, smollm3, ernie4_5, qwen2, qwen3, qwen3moe, qwen2moe, olmo2, olmoe, phi3, granite, granitemoe, mistral3, gemma, gemma2, gemma3)");
}

TEST(GgufModel, MissingTensor) {
  test::TinySpec s;
  s.claimed_layers = 3;  // metadata says 3 layers, tensors exist for 2
  auto w = test::tiny_llama(s);
  EXPECT_EQ(model_error(w), "m.gguf: missing required tensor 'blk.2.attn_norm.weight'");
}

TEST(GgufModel, Qwen2NeedsItsProjectionBiases) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto with = test::qwen2_graft(f, 0.1f), without = test::qwen2_graft(f, 0.1f, false);
  EXPECT_EQ(model_error(with), "");
  EXPECT_EQ(model_error(without), "m.gguf: missing required tensor 'blk.0.attn_q.bias'");
}

// Llama 3's rope_freqs: head dim 16 has 8 pairs, each with a positive divisor.
TEST(GgufModel, RopeFreqsAreOnePositiveDivisorPerPair) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::llama3_graft(f);
  EXPECT_EQ(model_error(ok), "");
  {
    const auto bytes = ok.serialize();
    const File g = File::parse(bytes, "m.gguf");
    const model::Weights w = model::bind_weights(g, model::load_config(g));
    EXPECT_EQ(w.rope_freqs, test::llama3_rope_divisors(16, 10000.f, {}));
  }
  auto with = [&](const std::vector<float>& divisors) {
    gguf::Writer w = test::llama3_graft(f, divisors);
    return model_error(w);
  };
  EXPECT_NE(with(std::vector<float>(7, 1.f)).find("rope_freqs.weight"), std::string::npos);
  std::vector<float> zero(8, 1.f);
  zero[3] = 0.f;
  EXPECT_EQ(with(zero), "m.gguf: tensor 'rope_freqs.weight' holds 0.000000 (divisors must be > 0)");
}

// smollm3: every fourth layer (3, 7, ...) rotates neither Q nor K.
TEST(GgufModel, SmolLM3SkipsRopeInEveryFourthLayer) {
  test::TinySpec spec;
  spec.n_layer = 8;
  const auto llama = test::tiny_llama(spec).serialize();
  auto w = test::smollm3_graft(File::parse(llama, "tiny.gguf"));
  EXPECT_EQ(model_error(w), "");
  const auto bytes = w.serialize();
  const model::Config c = model::load_config(File::parse(bytes, "m.gguf"));
  for (int layer = 0; layer < 8; ++layer) EXPECT_EQ(c.uses_rope(layer), layer != 3 && layer != 7) << layer;
  EXPECT_EQ(c.rope_order, model::RopeOrder::Normal);
  const model::Config plain = model::load_config(File::parse(llama, "tiny.gguf"));
  for (int layer = 0; layer < 8; ++layer) EXPECT_TRUE(plain.uses_rope(layer)) << layer;
}

TEST(GgufModel, Gemma2KeysAndTensors) {
  test::TinySpec spec;
  spec.n_layer = 4;
  const auto llama = test::tiny_llama(spec).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::gemma2_graft(f, 16, {2.5f, 5.f});
  EXPECT_EQ(model_error(ok), "");
  const auto bytes = ok.serialize();
  const File g = File::parse(bytes, "m.gguf");
  const model::Config c = model::load_config(g);
  EXPECT_EQ(c.n_layer, 4);  // no extra layer: local, global, local, global
  EXPECT_TRUE(c.is_swa(0) && !c.is_swa(1) && c.is_swa(2) && !c.is_swa(3));
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.post_norms && c.scale_embeddings && c.tied_embeddings);
  EXPECT_EQ(c.ffn_act, model::FfnAct::GeluTanh);
  EXPECT_EQ(c.attn_softcap, 2.5f);
  EXPECT_EQ(c.final_logit_softcap, 5.f);
  EXPECT_EQ(c.rope_theta_swa, c.rope_theta);
  gguf::Writer negative = test::gemma2_graft(f, 16, {-1.f, 5.f});
  EXPECT_EQ(model_error(negative), "m.gguf: attn_logit_softcapping must be >= 0");
  // A file without the keys gets llama.cpp's Gemma 2 defaults: window 4096, caps 50 and 30.
  auto bare = without(g, {"gemma2.attention.sliding_window", "gemma2.attn_logit_softcapping",
                           "gemma2.final_logit_softcapping"});
  const auto bare_bytes = bare.serialize();
  const model::Config d = model::load_config(File::parse(bare_bytes, "bare.gguf"));
  EXPECT_EQ(d.swa_window, 4096);
  EXPECT_EQ(d.attn_softcap, 50.f);
  EXPECT_EQ(d.final_logit_softcap, 30.f);
}

TEST(GgufModel, GraniteScalarsAndRefusedBiases) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::granite_graft(f, {1.5f, 0.8f, 0.25f, 2.f});
  EXPECT_EQ(model_error(ok), "");
  const auto bytes = ok.serialize();
  const File g = File::parse(bytes, "m.gguf");
  const model::Config c = model::load_config(g);
  EXPECT_EQ(c.embedding_scale, 1.5f);
  EXPECT_EQ(c.residual_scale, 0.8f);
  EXPECT_EQ(c.attn_scale(), 0.25f);
  EXPECT_EQ(c.logit_scale, 2.f);
  // logit_scale is required (as in llama.cpp); the others default to unused.
  auto bare = without(g, {"granite.logit_scale"});
  EXPECT_EQ(model_error(bare), "m.gguf: missing required key 'granite.logit_scale'");
  auto negative = test::granite_graft(f, {1.5f, -0.8f, 0.25f, 2.f});
  EXPECT_EQ(model_error(negative), "m.gguf: key 'granite.residual_scale' must be in [0, 1e6)");
  // A bias the forward pass has no place for would be ignored: refused.
  auto biased = test::tiny_llama({});
  std::vector<uint8_t> zeros(64 * 4, 0);
  biased.add_tensor("blk.0.ffn_down.bias", {64}, tensor::DType::F32, zeros);
  EXPECT_EQ(model_error(biased), "m.gguf: tensor 'blk.0.ffn_down.bias' is not supported (kvlab's llama has no bias there)");
}

// A mixture of experts (Mixtral as llama, qwen3moe): its keys, its 3-D
// tensors' shapes, and the errors of a file that lacks or breaks them.
TEST(GgufModel, MixtureOfExpertsKeysAndTensors) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::qwen3moe_graft(f, {.n_expert = 4, .n_expert_used = 2});
  EXPECT_EQ(model_error(ok), "");
  const auto bytes = ok.serialize();
  const File g = File::parse(bytes, "m.gguf");
  const model::Config c = model::load_config(g);
  EXPECT_TRUE(c.is_moe() && c.expert_weights_norm && c.qk_norm);
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, c.n_ff);
  const model::Weights w = model::bind_weights(g, c);
  ASSERT_EQ(w.layers[0].experts.size(), 4u);
  const kernels::WeightMatrix& down3 = w.layers[0].experts[3].down;
  EXPECT_EQ(down3.rows, size_t(c.n_embd));
  EXPECT_EQ(down3.data, g.find_tensor("blk.0.ffn_down_exps.weight")->data + 3 * down3.bytes());
  auto too_many = test::mixtral_graft(f, {.n_expert = 4, .n_expert_used = 5});
  EXPECT_EQ(model_error(too_many), "m.gguf: key 'llama.expert_used_count' = 5 is out of range 1..4");
  auto beyond_bound = test::mixtral_graft(f, {.n_expert = 40, .n_expert_used = 33});
  EXPECT_EQ(model_error(beyond_bound), "m.gguf: key 'llama.expert_used_count' = 33 is out of range 1..32");
  auto bare = without(g, {"qwen3moe.expert_count"});  // experts' tensors without the keys
  EXPECT_EQ(model_error(bare), "m.gguf: missing required key 'qwen3moe.expert_count'");
  auto no_router = without(g, {"blk.0.ffn_gate_inp.weight"});
  EXPECT_EQ(model_error(no_router), "m.gguf: missing required tensor 'blk.0.ffn_gate_inp.weight'");
}

// qwen2moe's shared expert: its width from expert_shared_feed_forward_length
// (n_ff without the key), its sigmoid gate required; olmo2's norms.
TEST(GgufModel, SharedExpertAndOlmo2Norms) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::qwen2moe_graft(f);
  EXPECT_EQ(model_error(ok), "");
  const auto bytes = ok.serialize();
  const File g = File::parse(bytes, "m.gguf");
  const model::Config c = model::load_config(g);
  EXPECT_TRUE(c.shared_expert_gated && c.qkv_bias);
  EXPECT_FALSE(c.expert_weights_norm);
  EXPECT_EQ(c.n_ff_shexp, c.n_ff);
  const model::Weights w = model::bind_weights(g, c);
  EXPECT_EQ(w.layers[1].shared.down.cols, size_t(c.n_ff));
  EXPECT_EQ(w.layers[1].shared_gate.size(), size_t(c.n_embd));
  auto ungated = without(g, {"blk.1.ffn_gate_inp_shexp.weight"});
  EXPECT_EQ(model_error(ungated), "m.gguf: missing required tensor 'blk.1.ffn_gate_inp_shexp.weight'");

  auto olmo2 = test::olmo2_graft(f);
  EXPECT_EQ(model_error(olmo2), "");
  const auto olmo2_bytes = olmo2.serialize();
  const File o = File::parse(olmo2_bytes, "m.gguf");
  const model::Config oc = model::load_config(o);
  EXPECT_TRUE(oc.qk_norm && oc.qk_norm_whole && oc.post_norms);
  EXPECT_FALSE(oc.input_norms);
  const model::Weights ow = model::bind_weights(o, oc);
  EXPECT_TRUE(ow.layers[0].attn_norm.empty() && ow.layers[0].ffn_norm.empty());
  EXPECT_EQ(ow.layers[0].q_norm.size(), size_t(oc.q_dim()));
  EXPECT_EQ(ow.layers[0].k_norm.size(), size_t(oc.kv_dim()));
}

TEST(GgufModel, Gemma3KeysAndTensors) {
  const auto llama = test::tiny_llama({}).serialize();
  const File f = File::parse(llama, "tiny.gguf");
  auto ok = test::gemma3_graft(f, 16);
  EXPECT_EQ(model_error(ok), "");
  {
    const auto bytes = ok.serialize();
    const File g = File::parse(bytes, "m.gguf");
    const model::Config c = model::load_config(g);
    EXPECT_EQ(c.swa_window, 16);
    EXPECT_EQ(c.n_layer, 3);  // the graft appends a global layer
    EXPECT_TRUE(c.is_swa(0) && c.is_swa(1) && c.is_swa(2));  // pattern 6: layers 5, 11, .. are global
    EXPECT_EQ(c.first_visible(0, 15), 0);
    EXPECT_EQ(c.first_visible(0, 16), 1);
    EXPECT_FLOAT_EQ(c.attn_scale(), 0.25f);  // 1/sqrt(head_dim 16)
  }
  auto dynamic = test::gemma3_graft(f, 16);
  dynamic.set_string("gemma3.rope.scaling.type", "dynamic");
  EXPECT_EQ(model_error(dynamic), "m.gguf: rope scaling 'dynamic' is not supported (linear, yarn and longrope are)");
}

TEST(GgufModel, WrongTensorShape) {
  test::TinySpec s;
  auto w = test::tiny_llama(s);
  std::vector<uint8_t> d(64 * 4, 0);
  w.add_tensor("blk.9.extra", {64}, tensor::DType::F32, d);  // harmless extra tensor
  EXPECT_EQ(model_error(w), "");
  s.n_ff = 128;
  gguf::Writer bad = test::tiny_llama(s);
  // Same tensors but metadata claims a different n_ff: every FFN matrix mismatches.
  const auto bytes = bad.serialize();
  File f = File::parse(bytes, "m.gguf");
  auto cfg = model::load_config(f);
  cfg.n_ff = 96;
  try {
    model::bind_weights(f, cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "m.gguf: tensor 'blk.0.ffn_gate.weight' has shape [64, 128], expected [64, 96]");
  }
}

}  // namespace
}  // namespace kvlab

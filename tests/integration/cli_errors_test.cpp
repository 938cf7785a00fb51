// Bad input at the command line: every malformed-file case of the GGUF reader
// and bad options must end with exit status 1 and exactly one line on stderr,
// "kvlab: error: <file>: <what is wrong>", and never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/arch_graft.h"
#include "common/models.h"
#include "common/scratch_dir.h"
#include "common/tiny_model.h"
#include "gguf/writer.h"
#include "kernels/cpu.h"

namespace kvlab {
namespace {

// One scratch directory per test process (removed at exit).
const test::ScratchDir& scratch() {
  static const test::ScratchDir dir;
  return dir;
}

struct Result {
  int status = -1;
  std::string out, err;
};

// Runs build/kvlab with `args` (shell-quoted by the caller), capturing both
// streams; `env`: VAR=value settings for it.
Result run_kvlab(const std::string& args, const std::string& env = "") {
  const std::string out = scratch().file("kvlab.out"), err = scratch().file("kvlab.err");
  const std::string cmd = "timeout 60 env " + env + " " + std::string(KVLAB_BINARY) + " " + args + " >" + out + " 2>" +
                          err + " </dev/null";
  const int raw = std::system(cmd.c_str());
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = scratch().file(name);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

void expect_one_line_error(const Result& r, const std::string& expected) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err, "kvlab: error: " + expected + "\n");
}

std::vector<uint8_t> tiny_bytes() { return test::tiny_llama({}).serialize(); }

size_t find(const std::vector<uint8_t>& b, const std::string& s) {
  return size_t(std::search(b.begin(), b.end(), s.begin(), s.end()) - b.begin());
}

TEST(CliErrors, MissingFile) {
  expect_one_line_error(run_kvlab("info -m /nonexistent/x.gguf"),
                        "/nonexistent/x.gguf: cannot open: No such file or directory");
}

TEST(CliErrors, BadMagic) {
  auto b = tiny_bytes();
  b[1] = 'X';
  const auto p = write_file("magic.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": bad magic: not a GGUF file");
}

TEST(CliErrors, UnsupportedVersion) {
  auto b = tiny_bytes();
  b[4] = 7;
  const auto p = write_file("version.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": unsupported GGUF version 7 (supported: 2, 3)");
}

TEST(CliErrors, TruncatedFile) {
  auto b = tiny_bytes();
  b.resize(b.size() / 2);
  const auto p = write_file("truncated.gguf", b);
  const Result r = run_kvlab("run -m " + p + " -p hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("kvlab: error: " + p + ": tensor '", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("lies outside the file (truncated?)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST(CliErrors, TruncatedHeader) {
  auto b = tiny_bytes();
  b.resize(20);
  const auto p = write_file("header.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p),
                        p + ": truncated file: metadata count needs 8 bytes at offset 16, only 4 left");
}

TEST(CliErrors, UnknownDtype) {
  auto b = tiny_bytes();
  const size_t at = find(b, "token_embd.weight") + 17 + 4 + 16;  // name, n_dims, 2 dims -> dtype
  const uint32_t bad = 77;
  std::memcpy(&b[at], &bad, 4);
  const auto p = write_file("dtype.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": tensor 'token_embd.weight' has unknown or unsupported dtype 77");
}

TEST(CliErrors, DataOutsideAndOverlap) {
  auto b = tiny_bytes();
  const size_t at = find(b, "output_norm.weight") + 18 + 4 + 8 + 4;  // -> offset
  const uint64_t zero = 0;
  std::memcpy(&b[at], &zero, 8);  // on top of token_embd
  const auto p = write_file("overlap.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": tensors 'token_embd.weight' and 'output_norm.weight' overlap");
  const uint64_t far = 1ull << 40;
  std::memcpy(&b[at], &far, 8);
  const auto q = write_file("outside.gguf", b);
  const Result r = run_kvlab("info -m " + q);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("tensor 'output_norm.weight' data [1099511627776, +256) lies outside the file"), std::string::npos)
      << r.err;
}

TEST(CliErrors, ShapeMismatch) {
  gguf::Writer w;
  std::vector<uint8_t> q(34, 0);
  w.add_tensor("q", {32}, tensor::DType::Q8_0, q);
  auto b = w.serialize();
  const uint64_t bad = 40;
  std::memcpy(&b[find(b, "q") + 1 + 4], &bad, 8);
  const auto p = write_file("shape.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": tensor 'q' row length 40 is not a multiple of the q8_0 block size 32");
}

TEST(CliErrors, RopeFreqsMustBePositive) {
  const auto llama = test::tiny_llama({}).serialize();
  const gguf::File f = gguf::File::parse(llama, "tiny.gguf");
  std::vector<float> divisors(8, 1.f);
  divisors[5] = -2.f;
  const auto p = write_file("rope-freqs.gguf", test::llama3_graft(f, divisors).serialize());
  expect_one_line_error(run_kvlab("info -m " + p),
                        p + ": tensor 'rope_freqs.weight' holds -2.000000 (divisors must be > 0)");
}

// A llama file relabelled phi3: its ffn_up holds only the up rows, where
// phi3 packs gate and up; and a LongRoPE attention factor out of range.
TEST(CliErrors, Phi3NeedsItsFusedGateAndUp) {
  const auto llama = test::tiny_llama({}).serialize();
  const gguf::File f = gguf::File::parse(llama, "tiny.gguf");
  auto relabelled = [&](float attn_factor) {
    gguf::Writer w;
    test::graft_detail::copy_metadata(f, "phi3", w);
    w.set_f32("phi3.rope.scaling.attn_factor", attn_factor);
    for (const gguf::TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.dims, t.dtype, {t.data, size_t(t.n_bytes)});
    return w.serialize();
  };
  const auto p = write_file("phi3-unfused.gguf", relabelled(1.f));
  const Result r = run_kvlab("info -m " + p);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("kvlab: error: " + p + ": tensor 'blk.0.ffn_up.weight'", 0), 0u) << r.err;
  const auto q = write_file("phi3-attn-factor.gguf", relabelled(-1.f));
  expect_one_line_error(run_kvlab("info -m " + q), q + ": rope.scaling.attn_factor must be in (0, 100)");
}

TEST(CliErrors, MissingTensorAndKey) {
  test::TinySpec s;
  s.claimed_layers = 3;
  const auto p = write_file("layers.gguf", test::tiny_llama(s).serialize());
  expect_one_line_error(run_kvlab("info -m " + p), p + ": missing required tensor 'blk.2.attn_norm.weight'");
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  const auto q = write_file("keys.gguf", w.serialize());
  expect_one_line_error(run_kvlab("info -m " + q), q + ": missing required key 'llama.block_count'");
}

TEST(CliErrors, AbsurdCountsAndStrings) {
  auto b = tiny_bytes();
  const uint64_t huge = 1ull << 62;
  std::memcpy(&b[8], &huge, 8);
  const auto p = write_file("count.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + p), p + ": tensor count " + std::to_string(huge) +
                                                       " needs at least 24 bytes each, only " +
                                                       std::to_string(b.size() - 24) +
                                                       " left (truncated or corrupt file)");
  b = tiny_bytes();
  std::memcpy(&b[24], &huge, 8);  // first key's length
  const auto q = write_file("string.gguf", b);
  expect_one_line_error(run_kvlab("info -m " + q), q + ": metadata key has absurd length " + std::to_string(huge));
}

TEST(CliErrors, NotAModelTokenizerMissing) {
  // A valid model without tokenizer metadata: `run` needs a vocabulary.
  const auto p = write_file("novocab.gguf", tiny_bytes());
  const Result r = run_kvlab("run -m " + p + " -p hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("kvlab: error: " + p + ": ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST(CliErrors, BadOptions) {
  Result r = run_kvlab("run -p hi --top-p 2");
  EXPECT_NE(r.status, 0);
  r = run_kvlab("run -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf -p hi -c 100000");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "kvlab: error: context 100000 exceeds the model's training context 2048\n");
  r = run_kvlab("run -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf");
  EXPECT_EQ(r.err, "kvlab: error: give exactly one of -p PROMPT or -f FILE\n");
  r = run_kvlab("bench -p 0 -n 4 --profile -o csv");
  expect_one_line_error(r, "--profile needs -o md or json: its stage tables have no csv form");
  expect_one_line_error(run_kvlab("bench --pg 512"), "--pg '512': expected PROMPT,GEN token counts, e.g. 512,128");
  expect_one_line_error(run_kvlab("bench --pg 512,x"), "--pg '512,x': expected PROMPT,GEN token counts, e.g. 512,128");
  expect_one_line_error(run_kvlab("bench --pg 0,128"), "--pg '0,128': both counts must be at least 1");
  expect_one_line_error(run_kvlab("run -p hi -n 4 --draft 4 --no-kv-cache"),
                        "speculative decoding (--draft) needs the KV cache");
  r = run_kvlab("frobnicate");
  EXPECT_NE(r.status, 0);
  // A prompt file that is no file, or never ends, is refused, not read into
  // all the memory there is.
  const std::string tiny = std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf";
  expect_one_line_error(run_kvlab("run -m " + tiny + " -f /dev/zero"),
                        "/dev/zero: larger than 64 MiB, too large for a prompt or a run record");
  expect_one_line_error(run_kvlab("tokenize -m " + tiny + " -f " + scratch().path.string()),
                        scratch().path.string() + ": is a directory, not a file");
  // perplexity on a text shorter than two contexts: llama-perplexity asks
  // for as much.
  expect_one_line_error(run_kvlab("perplexity -m " + tiny + " -f " + std::string(KVLAB_SOURCE_DIR) + "/tests/golden/perplexity-text.txt -c 2048"),
                        "the text has 3137 tokens; perplexity at a context of 2048 needs at least 4096 (lower -c)");
  // --kl-divergence: a base that is not one, and a text beside the base's.
  const std::string text = std::string(KVLAB_SOURCE_DIR) + "/tests/golden/perplexity-text.txt";
  expect_one_line_error(run_kvlab("perplexity -m " + tiny + " --kl-divergence --kl-divergence-base " + text),
                        text + " is not a llama-perplexity logits file (no \"_logits_\" header)");
  expect_one_line_error(run_kvlab("perplexity -m " + tiny + " -f " + text + " --kl-divergence --kl-divergence-base " + text),
                        "--kl-divergence reads its tokens from the base file: leave -f out");
  expect_one_line_error(run_kvlab("perplexity -m " + tiny), "perplexity needs a text (-f), or --kl-divergence to compare against a base");
  // quantize into a directory: refused after writing, the temporary file removed.
  const std::string dir = scratch().path.string();
  expect_one_line_error(run_kvlab("quantize " + tiny + " " + dir + " --type f16"),
                        dir + ": cannot rename the finished file into place: Is a directory");
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
  // A number out of range says what is wanted (not CLI11's range up to the
  // largest double, 309 digits).
  for (const auto& [args, line] : std::vector<std::pair<std::string, std::string>>{
           {"run -p hi -c -3", "--ctx-size: must be 0 or more, got -3"},
           {"diagnose --ttft-ms -1", "--ttft-ms: must be above 0, got -1"},
           {"diagnose --decode-tok-s 0", "--decode-tok-s: must be above 0, got 0"},
           {"diagnose --ttft-ms fast", "--ttft-ms: expected a number, got 'fast'"},
           {"run -p hi --draft 65", "--draft: Value 65 not in range 0 to 64"},
           {"run -p hi --draft 2 --draft-ngram 0", "--draft-ngram: Value 0 not in range 1 to 16"},
           {"serve --pass-target-ms 5ms", "--pass-target-ms: must be auto or milliseconds from 0 to 60000, got '5ms'"},
           {"simulate --serve --pass-target-ms -1",
            "--pass-target-ms: must be auto or milliseconds from 0 to 60000, got '-1'"}}) {
    r = run_kvlab(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), line) << args;
    EXPECT_LT(r.err.size(), 200u) << args;
  }
  // serve: a KV pool too small for one context is refused once the model is
  // loaded (after the "listening" line), not discovered by a request later.
  r = run_kvlab("serve -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf -c 128 --kv-blocks 3" +
                " --port " + std::to_string(20000 + ::getpid() % 20000));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.err.ends_with("kvlab: error: KV pool of 3 blocks cannot hold one context of 128 (needs 8)\n")) << r.err;
}

// KVLAB_ISA names a kernel set; one this CPU cannot run is refused with the
// reason, before any work.
TEST(CliErrors, KernelSetTheCpuCannotRun) {
  const std::string info = "info -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf";
  expect_one_line_error(run_kvlab(info, "KVLAB_ISA=avx1024"), "KVLAB_ISA=avx1024: expected scalar, avx2, avx512 or amx");
  EXPECT_EQ(run_kvlab(info, "KVLAB_ISA=scalar").status, 0);
  const kernels::CpuFeatures& f = kernels::cpu();
  if (f.best() == kernels::Isa::Amx) return;
  const Result r = run_kvlab(info, "KVLAB_ISA=amx");
  EXPECT_EQ(r.status, 1);
  const std::string want = "kvlab: error: this CPU cannot run the amx kernels (best: " + std::string(kernels::isa_name(f.best()));
  EXPECT_EQ(r.err.rfind(want, 0), 0u) << r.err;
}

TEST(CliErrors, EverySubcommandHasHelp) {
  for (const char* cmd : {"run", "tokenize", "info", "demo", "bench", "quantize", "simulate", "diagnose", "probe", "serve", "perplexity"}) {
    const Result r = run_kvlab(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << cmd;
  }
}

// The main job end to end, on the shared tiny model: both modes give the
// same tokens, and every section is there (the roofline's, or its note that
// a probe is missing), the stage split of a decode step included.
TEST(Cli, DemoShowsEverySection) {
  const Result r = run_kvlab("demo -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf -n 40");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* want : {"identical tokens with and without the KV cache: YES (40 tokens)", "| TTFT ",
                           "per-token latency by position", "## On this machine's roofline",
                           "## Where a cached decode step goes\n\n31 more cached steps",
                           "| weight matmuls (QKV, O, gate+up, down) |", "| attention over the KV cache |",
                           "## Several tokens per pass: speculative decoding",
                           "| code that repeats itself, 40 tokens | plain | --draft 4 |",
                           "identical tokens with and without drafts: YES",
                           "## The same comparison for Llama-3.1-8B (bf16) on an H100 SXM, simulated"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

// --logit-bias ID-inf bans the greedy pick, ID+BIAS forces one; a bad
// argument or an id past the vocabulary is a one-line error.
TEST(Cli, LogitBiasAndOpenAiPenalties) {
  const std::string run = "run -m " + std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf" +
                          " -p 'Once upon a time' -n 1 --temp 0 --json";
  auto first_token = [&](const std::string& extra) {
    const Result r = run_kvlab(run + " " + extra);
    EXPECT_EQ(r.status, 0) << extra << ": " << r.err;
    return nlohmann::json::parse(r.out)["tokens"][0].get<int>();
  };
  const int greedy = first_token("");
  const int second = first_token("--logit-bias " + std::to_string(greedy) + "-inf");
  EXPECT_NE(second, greedy);
  EXPECT_EQ(first_token("-l 7+100"), 7);
  // The prompt's own tokens are in the penalty window: a prompt token
  // biased to the top is pushed back off it by a presence penalty, not once
  // the window no longer reaches back to it.
  const Result ids = run_kvlab("tokenize -m " + std::string(KVLAB_SOURCE_DIR) +
                               "/tests/models/stories260K.gguf -p 'Once upon a time' --json");
  const auto prompt = nlohmann::json::parse(ids.out)["ids"].get<std::vector<int>>();
  ASSERT_EQ(prompt.size(), 5u);  // BOS, Once, upon, a, time
  const std::string once = std::to_string(prompt[1]);
  EXPECT_EQ(first_token("-l " + once + "+30"), prompt[1]);
  EXPECT_NE(first_token("-l " + once + "+30 --presence-penalty 100"), prompt[1]);
  EXPECT_NE(first_token("-l " + once + "+30 --frequency-penalty 100"), prompt[1]);
  EXPECT_EQ(first_token("-l " + once + "+30 --presence-penalty 100 --repeat-last-n 3"), prompt[1]);
  for (const auto& [arg, line] : std::vector<std::pair<std::string, std::string>>{
           {"--logit-bias 12", "--logit-bias '12': expected ID+BIAS or ID-BIAS, e.g. 15043+1 or 15043-inf"},
           {"--logit-bias x+1", "--logit-bias 'x+1': expected ID+BIAS or ID-BIAS, e.g. 15043+1 or 15043-inf"},
           {"--logit-bias 12+", "--logit-bias '12+': expected ID+BIAS or ID-BIAS, e.g. 15043+1 or 15043-inf"},
           {"--logit-bias 12+inf", "logit bias for token id 12 must be a number (or -inf to ban it)"},
           {"--logit-bias 512+1", "logit bias for token id 512: the vocabulary has ids 0..511"},
           {"--frequency-penalty nan", "--frequency-penalty must be a finite number"}})
    expect_one_line_error(run_kvlab(run + " " + arg), line);
}

// An empty prompt is a prompt: a model that adds BOS generates from BOS alone
// (as llama.cpp does); one that adds nothing is refused with the reason.
TEST(Cli, EmptyPrompt) {
  const std::string tiny = std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf";
  Result r = run_kvlab("run -m " + tiny + " -p '' -n 8 --temp 0 --json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"prompt_tokens\": 1"), std::string::npos) << r.out;
  r = run_kvlab("tokenize -m " + tiny + " -p ''");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "1 tokens\n");
  // The same with a gpt2-style vocabulary that adds no BOS: a tiny graft of
  // one would need the whole default model, so the message is checked on
  // the default model only when it is there.
  if (std::filesystem::exists(test::kDefaultModel)) {
    r = run_kvlab("run -m " + test::kDefaultModel + " -p '' -n 4");
    expect_one_line_error(r, "the prompt is empty and this model adds no BOS token: nothing to start from");
  }
}

// --draft: the same tokens in fewer decode passes, and what the drafts did.
TEST(Cli, SpeculativeRunReportsItsDrafts) {
  const std::string tiny = std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf";
  const std::string args = "run -m " + tiny + " -p 'Once upon a time, there was a little girl' -n 120 --temp 0 --ignore-eos";
  const Result plain = run_kvlab(args + " --json"), spec = run_kvlab(args + " --json --draft 4");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(spec.status, 0) << spec.err;
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_FALSE(a.contains("speculative"));
  const nlohmann::json& sp = b["speculative"];
  EXPECT_EQ(sp["method"], "ngram");
  EXPECT_EQ(sp["draft_max"], 4);
  EXPECT_GT(sp["verify_passes"].get<int>(), 0);
  EXPECT_LE(sp["accepted"].get<int>(), sp["drafted"].get<int>());
  // Each kept draft saves a pass (the one a stop ends inside keeps no bonus token).
  const int saved = a["roofline"]["decode"]["passes"].get<int>() - b["roofline"]["decode"]["passes"].get<int>();
  EXPECT_TRUE(saved == sp["accepted"].get<int>() || saved + 1 == sp["accepted"].get<int>()) << saved << " " << sp;
  EXPECT_GT(sp["accepted"].get<int>(), 0);
  const Result text = run_kvlab(args + " --draft 4");
  EXPECT_NE(text.err.find("speculative (ngram, up to 4 drafts): "), std::string::npos) << text.err;
}

TEST(Cli, ContextLimitIsReportedNotACrash) {
  const Result r = run_kvlab("run -m " + std::string(KVLAB_SOURCE_DIR) +
                             "/tests/models/stories260K.gguf -p 'Once upon a time' -n 100 -c 16 --temp 0 --ignore-eos");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("stopped: the context of 16 tokens is full"), std::string::npos) << r.err;
}

// Tensor and pipeline parallelism: layouts the model cannot split evenly,
// devices the catalog links to nothing, links it does not know.
TEST(CliErrors, SimulateLayoutsTheModelOrHardwareCannotTake) {
  expect_one_line_error(run_kvlab("simulate --model llama-3.1-70b --hw h100 --tp 3 --gen 1"),
                        "--tp 3 does not divide the model's 64 query heads");
  expect_one_line_error(run_kvlab("simulate --hw m2-ultra --tp 2 --gen 1"),
                        "hardware 'm2-ultra' has no default link between devices in the catalog; name one with "
                        "--link (nvlink3, nvlink4, nvlink5, pcie4, pcie5)");
  expect_one_line_error(run_kvlab("simulate --tp 2 --link nvlink9 --gen 1"),
                        "unknown link 'nvlink9' (expected one of: nvlink3, nvlink4, nvlink5, pcie4, pcie5)");
  expect_one_line_error(run_kvlab("diagnose --tp 2"),
                        "--tp, --pp and --link need --hw: the devices the metrics come from");
  const Result r = run_kvlab("simulate --model llama-3.1-70b --hw h100 --tp 4 --gen 4 -o json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"fits\": true"), std::string::npos);
  EXPECT_NE(r.out.find("\"tp\": 4"), std::string::npos);
}

// simulate --serve: a load that is neither open nor closed, lengths it
// cannot parse or fit, and its flags without it.
TEST(CliErrors, SimulateServeLoadsItCannotRun) {
  expect_one_line_error(run_kvlab("simulate --serve"),
                        "simulate --serve needs exactly one of --rate R (> 0 requests/s) or --concurrency C (>= 1)");
  expect_one_line_error(run_kvlab("simulate --serve --rate 2 --concurrency 2"),
                        "simulate --serve needs exactly one of --rate R (> 0 requests/s) or --concurrency C (>= 1)");
  expect_one_line_error(run_kvlab("simulate --serve --concurrency 1 --prompt-len 9:3"),
                        "--prompt-len range '9:3' has LO above HI");
  expect_one_line_error(run_kvlab("simulate --serve --concurrency 1 --prompt-len 4096"),
                        "prompt of 4096 tokens does not fit the context of 4096 (--ctx-size) with room for an answer");
  expect_one_line_error(run_kvlab("simulate --serve --concurrency 1 --requests 100000 --output-len 4000"),
                        "--requests x the longest --output-len must be at most 33554432 tokens");
  const Result no_serve = run_kvlab("simulate --rate 3");
  EXPECT_NE(no_serve.status, 0);
  EXPECT_NE(no_serve.err.find("--rate requires --serve"), std::string::npos) << no_serve.err;
  const Result no_draft_serve = run_kvlab("simulate --draft 4");
  EXPECT_NE(no_draft_serve.status, 0);
  EXPECT_NE(no_draft_serve.err.find("--draft requires --serve"), std::string::npos) << no_draft_serve.err;
  const Result accept = run_kvlab("simulate --serve --concurrency 1 --draft 4 --draft-accept 2");
  EXPECT_NE(accept.status, 0);
  EXPECT_NE(accept.err.find("--draft-accept: Value 2 not in range"), std::string::npos) << accept.err;
  const Result r = run_kvlab("simulate --serve --concurrency 2 --requests 6 --prompt-len 64 --output-len 8 -o json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"completed\": 6"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvlab

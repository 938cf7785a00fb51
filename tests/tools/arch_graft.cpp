// Writes a graft of a llama GGUF under another architecture
// (tests/common/arch_graft.h), for tests/golden/gen_golden.py to run through
// llama.cpp:
//
//   build/tests/kvlab_arch_graft ARCH tests/models/stories260K.gguf OUT.gguf
//
// ARCH: one of the names below (the usage line lists them).
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <string>

#include "common/arch_graft.h"

namespace {

using kvlab::gguf::File;
using kvlab::gguf::Writer;
namespace test = kvlab::test;

const std::map<std::string, std::function<Writer(const File&)>>& grafts() {
  static const std::map<std::string, std::function<Writer(const File&)>> g = {
      {"smollm3", [](const File& f) { return test::smollm3_graft(f); }},
      {"ernie4_5", [](const File& f) { return test::ernie4_5_graft(f); }},
      {"qwen2", [](const File& f) { return test::qwen2_graft(f, test::kQwen2GraftBias); }},
      {"qwen3", [](const File& f) { return test::qwen3_graft(f); }},
      {"qwen3moe", [](const File& f) { return test::qwen3moe_graft(f); }},
      {"qwen2moe", [](const File& f) { return test::qwen2moe_graft(f); }},
      {"mixtral", [](const File& f) { return test::mixtral_graft(f); }},
      {"granitemoe", [](const File& f) { return test::granitemoe_graft(f); }},
      {"olmoe", [](const File& f) { return test::olmoe_graft(f); }},
      {"olmo2", [](const File& f) { return test::olmo2_graft(f); }},
      {"phi3", [](const File& f) { return test::phi3_graft(f); }},
      {"granite", [](const File& f) { return test::granite_graft(f); }},
      {"mistral3", [](const File& f) { return test::mistral3_graft(f); }},
      {"gemma", [](const File& f) { return test::gemma_graft(f); }},
      {"gemma2", [](const File& f) { return test::gemma2_graft(f, test::kGemma2GraftWindow); }},
      {"gemma3", [](const File& f) { return test::gemma3_graft(f, test::kGemma3GraftWindow); }},
      {"llama3", [](const File& f) { return test::llama3_graft(f); }},
      {"yarn", [](const File& f) { return test::yarn_graft(f); }},
  };
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const auto graft = argc == 4 ? grafts().find(argv[1]) : grafts().end();
  if (graft == grafts().end()) {
    std::string names;
    for (const auto& [name, make] : grafts()) names += (names.empty() ? "" : "|") + name;
    std::fprintf(stderr, "usage: kvlab_arch_graft %s LLAMA.gguf OUT.gguf\n", names.c_str());
    return 2;
  }
  try {
    graft->second(File::open(argv[2])).write(argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvlab_arch_graft: %s\n", e.what());
    return 1;
  }
  return 0;
}

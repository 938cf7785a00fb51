// Writes a smollm3, qwen2, qwen3, phi3, granite, mistral3, gemma, gemma2, gemma3, llama3, yarn, mixtral or
// qwen3moe graft of a llama GGUF (tests/common/arch_graft.h),
// for tests/golden/gen_golden.py to run through llama.cpp:
//
//   build/tests/kvlab_arch_graft smollm3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft qwen2 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft qwen3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft phi3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft granite tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft mistral3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft gemma tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft gemma2 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft gemma3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft llama3 tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft yarn tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft mixtral tests/models/stories260K.gguf OUT.gguf
//   build/tests/kvlab_arch_graft qwen3moe tests/models/stories260K.gguf OUT.gguf
#include <cstdio>
#include <exception>
#include <string>

#include "common/arch_graft.h"

int main(int argc, char** argv) {
  const std::string arch = argc == 4 ? argv[1] : "";
  if (arch != "smollm3" && arch != "qwen2" && arch != "qwen3" && arch != "phi3" && arch != "granite" && arch != "mistral3" && arch != "gemma" && arch != "gemma2" &&
      arch != "gemma3" && arch != "llama3" && arch != "yarn" && arch != "mixtral" && arch != "qwen3moe") {
    std::fprintf(stderr, "usage: kvlab_arch_graft smollm3|qwen2|qwen3|phi3|granite|mistral3|gemma|gemma2|gemma3|llama3|yarn|mixtral|qwen3moe LLAMA.gguf OUT.gguf\n");
    return 2;
  }
  try {
    const auto llama = kvlab::gguf::File::open(argv[2]);
    if (arch == "smollm3") kvlab::test::smollm3_graft(llama).write(argv[3]);
    else if (arch == "qwen2") kvlab::test::qwen2_graft(llama, kvlab::test::kQwen2GraftBias).write(argv[3]);
    else if (arch == "qwen3") kvlab::test::qwen3_graft(llama).write(argv[3]);
    else if (arch == "phi3") kvlab::test::phi3_graft(llama).write(argv[3]);
    else if (arch == "granite") kvlab::test::granite_graft(llama).write(argv[3]);
    else if (arch == "mistral3") kvlab::test::mistral3_graft(llama).write(argv[3]);
    else if (arch == "gemma") kvlab::test::gemma_graft(llama).write(argv[3]);
    else if (arch == "gemma2") kvlab::test::gemma2_graft(llama, kvlab::test::kGemma2GraftWindow).write(argv[3]);
    else if (arch == "gemma3") kvlab::test::gemma3_graft(llama, kvlab::test::kGemma3GraftWindow).write(argv[3]);
    else if (arch == "llama3") kvlab::test::llama3_graft(llama).write(argv[3]);
    else if (arch == "mixtral") kvlab::test::mixtral_graft(llama).write(argv[3]);
    else if (arch == "qwen3moe") kvlab::test::qwen3moe_graft(llama).write(argv[3]);
    else kvlab::test::yarn_graft(llama).write(argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvlab_arch_graft: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Writes the qwen2 graft of a llama GGUF (tests/common/qwen2_graft.h), for
// tests/golden/gen_golden.py to run through llama.cpp:
//
//   build/tests/kvlab_qwen2_graft ../shared/models/stories260K.gguf OUT.gguf
#include <cstdio>
#include <exception>

#include "common/qwen2_graft.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kvlab_qwen2_graft LLAMA.gguf OUT.gguf\n");
    return 2;
  }
  try {
    const auto llama = kvlab::gguf::File::open(argv[1]);
    kvlab::test::qwen2_graft(llama, kvlab::test::kQwen2GraftBias).write(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvlab_qwen2_graft: %s\n", e.what());
    return 1;
  }
  return 0;
}

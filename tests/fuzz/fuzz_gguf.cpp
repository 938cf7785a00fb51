// libFuzzer target for the GGUF reader: any byte string must either parse or
// raise kvlab::Error, never crash, hang or allocate without bound. A parsed
// file is then pushed through the model Config and the tokenizer vocabulary,
// which read metadata the way a real load does.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "gguf/file.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/gguf_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = kvlab::gguf::File::parse({data, size}, "fuzz.gguf");
    for (const auto& [key, value] : f.metadata()) (void)value.to_display();
    try {
      const auto cfg = kvlab::model::load_config(f);
      (void)kvlab::model::bind_weights(f, cfg);
    } catch (const kvlab::Error&) {
    }
    try {
      (void)kvlab::tokenizer::tokenizer_from_gguf(f);
    } catch (const kvlab::Error&) {
    }
  } catch (const kvlab::Error&) {
  }
  return 0;
}

// libFuzzer target for the Jinja engine: any bytes as a template, parsed and
// rendered for a conversation with tools, under small bounds. The only
// allowed failure is kvlab::Error (a one-line template error); any other
// exception, a crash, a hang or a runaway allocation is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "jinja/template.h"

namespace {

using kvlab::jinja::Json;

const Json& context() {
  static const Json ctx = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? 😀"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_123456789", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_123456789", "name": "get_weather", "content": "21C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvlab::jinja::RenderOptions options;
  options.max_output_bytes = size_t(1) << 16;
  options.max_loop_iterations = size_t(1) << 12;
  options.now = std::tm{};
  try {
    kvlab::jinja::Template(std::string(reinterpret_cast<const char*>(data), size)).render(context(), options);
  } catch (const kvlab::Error&) {
  }
  return 0;
}

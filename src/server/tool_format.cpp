#include "server/tool_format.h"

namespace kvlab::server {
namespace {

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

const ToolFormat& model_tool_format(const tokenizer::Tokenizer& tok) {
  if (!tok.chat_template_handles_tools()) return kGenericTools;
  const std::string& source = tok.vocab().chat_template;
  // Hermes-style templates show the model <tool_call></tool_call> blocks.
  if (contains(source, "<tool_call>") && contains(source, "</tool_call>")) return kHermesTools;
  // Llama 3.x asks for {"name": function name, "parameters": ...} and
  // returns results in the ipython role.
  if (contains(source, "\"parameters\": ") && contains(source, "ipython")) return kLlama3Tools;
  return kGenericTools;
}

}  // namespace kvlab::server

// ChatML prompt rendering, byte-for-byte what SmolLM2-Instruct's
// tokenizer.chat_template (Jinja) produces:
//
//   {% for message in messages %}
//     {% if loop.first and messages[0]['role'] != 'system' %}
//       <|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n
//     {% endif %}
//     <|im_start|>{role}\n{content}<|im_end|>\n
//   {% endfor %}
//   {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}
//
// (The default system prompt is emitted inside the loop, so an empty message
// list gets none.)
#include "tokenizer/tokenizer.h"

namespace kvlab::tokenizer {

std::string apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  static constexpr std::string_view kDefaultSystem =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  std::string out;
  if (!messages.empty() && messages.front().role != "system") out += kDefaultSystem;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>";
    out += m.role;
    out += '\n';
    out += m.content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace kvlab::tokenizer

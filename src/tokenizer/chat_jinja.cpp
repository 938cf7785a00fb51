// Tokenizer::apply_chat: the model's own chat template (the GGUF's
// tokenizer.chat_template) rendered by kvlab's Jinja engine with the
// variables transformers' apply_chat_template passes: messages, tools and
// documents (None when absent), add_generation_prompt, the special tokens
// bos_token and eos_token, and any extra keyword arguments.
#include "common/error.h"
#include "jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::tokenizer {
namespace {

using jinja::Json;

Json message_json(const ChatMessage& m) {
  const bool has_calls = !m.tool_calls.is_null() && !m.tool_calls.empty();
  // OpenAI's assistant message that only calls tools has content null, and
  // templates test for that ("content is not none").
  Json j = {{"role", m.role}, {"content", m.content.empty() && has_calls ? Json(nullptr) : Json(m.content)}};
  if (has_calls) j["tool_calls"] = m.tool_calls;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

Json template_context(const Vocab& v, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  Json list = Json::array();
  for (const ChatMessage& m : messages) list.push_back(message_json(m));
  Json context = {{"messages", std::move(list)},
                  {"tools", options.tools},
                  {"documents", nullptr},
                  {"add_generation_prompt", options.add_generation_prompt}};
  if (v.bos >= 0) context["bos_token"] = v.tokens[size_t(v.bos)];
  if (v.eos >= 0) context["eos_token"] = v.tokens[size_t(v.eos)];
  if (options.extra.is_object())
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it) context[it.key()] = it.value();
  return context;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void Tokenizer::parse_chat_template() {
  const std::string& source = vocab().chat_template;
  if (source.empty()) return;
  try {
    chat_template_.emplace(source);
  } catch (const Error& e) {
    chat_template_error_ = std::string("chat template ") + e.what();
  }
}

std::string Tokenizer::apply_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  const Vocab& v = vocab();
  if (v.chat_template.empty())
    return apply_chat_template(detect_chat_template(v.chat_template), messages, options.add_generation_prompt);
  if (!chat_template_) throw Error(chat_template_error_);
  std::string text;
  try {
    text = chat_template_->render(template_context(v, messages, options));
  } catch (const Error& e) {
    throw Error(std::string("chat template ") + e.what());
  }
  // Templates write the BOS (and some the EOS) themselves, and encode()
  // with add_special adds them again when the vocabulary asks for them:
  // drop the rendered ones then, as llama.cpp does, so that the prompt
  // holds one BOS. (SmolLM2's BOS is <|im_start|>, which its turns start
  // with; its vocabulary adds no BOS, so nothing is dropped.)
  if (v.add_bos && v.bos >= 0) {
    const std::string& bos = v.tokens[size_t(v.bos)];
    if (starts_with(text, bos)) text.erase(0, bos.size());
  }
  if (v.add_eos && v.eos >= 0) {
    const std::string& eos = v.tokens[size_t(v.eos)];
    if (ends_with(text, eos)) text.resize(text.size() - eos.size());
  }
  return text;
}

std::string Tokenizer::apply_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return apply_chat(messages, options);
}

bool Tokenizer::chat_template_handles_tools() const {
  return chat_template_ && chat_template_->references("tools");
}

}  // namespace kvlab::tokenizer

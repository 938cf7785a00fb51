// The fallback chat formats, for a model whose GGUF has no Jinja chat
// template (Tokenizer::apply_chat renders the template itself when there is
// one: tokenizer/chat_jinja.cpp). The format is recognised by markers in the
// template text, as llama.cpp's template detection does, and rendered here;
// with no text at all it is ChatML. What each format produces (with
// add_generation_prompt):
//
//  ChatML (SmolLM2, Qwen2):
//    <|im_start|>{role}\n{content}<|im_end|>\n ...  <|im_start|>assistant\n
//    When the first message is not a system message, the template's default
//    system message comes first, if it has one: SmolLM2's is
//    "You are a helpful AI assistant named SmolLM, trained by Hugging Face".
//  Gemma (gemma, gemma2, gemma3):
//    <start_of_turn>user\n{system}\n\n{content}<end_of_turn>\n
//    <start_of_turn>model\n{content}<end_of_turn>\n ...  <start_of_turn>model\n
//    No system role: system text opens the first user turn. "assistant" is
//    "model"; contents are trimmed.
//  Llama 3:
//    <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> ...
//    <|start_header_id|>assistant<|end_header_id|>\n\n     (contents trimmed)
//
// A template's BOS is not rendered: encoding with add_special adds it when
// the vocabulary asks for one.
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace kvlab::tokenizer {
namespace {

std::string trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// A Jinja string literal's text with its "\n" escapes (the only escape
// these templates use) turned into newlines.
std::string unescape_newlines(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') out += '\n', ++i;
    else out += text[i];
  }
  return out;
}

// The literal default system message of a ChatML template: the first text
// between "<|im_start|>system" + newline (a real one, or "\n" inside a Jinja
// string) and "<|im_end|>" that holds no Jinja expression or string
// delimiter (Qwen2's first system turn is built from the message, its
// second is the default).
std::string chatml_default_system(const std::string& jinja) {
  for (std::string_view nl : {"\n", "\\n"}) {
    const std::string open = "<|im_start|>system" + std::string(nl);
    for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1)) {
      const size_t from = at + open.size(), end = jinja.find("<|im_end|>", from);
      if (end == std::string::npos) break;
      const std::string_view text = std::string_view(jinja).substr(from, end - from);
      if (text.find_first_of("{}'\"") == std::string_view::npos) return unescape_newlines(text);
    }
  }
  return "";
}

}  // namespace

ChatTemplate detect_chat_template(const std::string& jinja) {
  if (jinja.find("<start_of_turn>") != std::string::npos) return {ChatFormat::Gemma, ""};
  if (jinja.find("<|start_header_id|>") != std::string::npos) return {ChatFormat::Llama3, ""};
  // ChatML, and the fallback for a model without a template, as llama.cpp's.
  return {ChatFormat::ChatML, chatml_default_system(jinja)};
}

std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) {
  std::string out;
  switch (t.format) {
    case ChatFormat::ChatML:
      if (!messages.empty() && messages.front().role != "system" && !t.default_system.empty())
        out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFormat::Gemma: {
      std::string system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") out += system + "\n\n", system.clear();
        out += trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case ChatFormat::Llama3:
      for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
  }
  return out;
}

}  // namespace kvlab::tokenizer

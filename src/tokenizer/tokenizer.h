// Tokenizer built from a GGUF vocabulary: byte-level BPE ("gpt2") and
// SentencePiece-style ("llama"). Independent of the GGUF reader: the caller
// fills a Vocab (see vocab_from_gguf in tokenizer/gguf_vocab.h).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/template.h"

namespace kvlab::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocab {
  std::string model;                 // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                   // tokenizer.ggml.pre: pre-tokenizer split ("smollm", "llama3", "default", ...)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (SentencePiece); may be empty
  std::vector<int32_t> types;        // tokenizer.ggml.token_type; may be empty (all Normal)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right" (BPE)
  int32_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;
  bool add_bos = false;              // tokenizer.ggml.add_bos_token
  bool add_eos = false;
  bool add_space_prefix = false;     // tokenizer.ggml.add_space_prefix (SentencePiece)
  std::string chat_template;         // tokenizer.chat_template (Jinja text, rendered by apply_chat)
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, std::string content) : role(std::move(role)), content(std::move(content)) {}

  std::string role;     // "system" | "user" | "assistant" | "tool"
  std::string content;  // an assistant message with tool calls and no text passes null to the template
  // An assistant's tool calls in OpenAI's shape, [{"id", "type": "function",
  // "function": {"name", "arguments"}}]; null when there are none.
  nlohmann::ordered_json tool_calls;
  std::string tool_call_id;  // a "tool" message: the id of the call it answers
  std::string name;          // a "tool" message: the function's name
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the assistant's header
  nlohmann::ordered_json tools;       // the tools (OpenAI's shape, an array), or null
  nlohmann::ordered_json extra;       // more template variables (an object), e.g. {"enable_thinking": false}
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws kvlab::Error on an inconsistent vocabulary.
  static std::unique_ptr<Tokenizer> create(Vocab vocab);

  // `add_special`: prepend BOS (and append EOS) as the vocabulary asks.
  // `parse_special`: recognise control/user-defined token texts such as
  // "<|im_start|>" in `text` and emit their ids.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
  // The exact bytes of one token (byte tokens decoded, SentencePiece "▁" -> ' ').
  // Control tokens decode to their text only when `render_special`.
  virtual std::string piece(int32_t id, bool render_special = false) const = 0;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  virtual const Vocab& vocab() const = 0;
  int32_t n_vocab() const { return int32_t(vocab().tokens.size()); }
  bool is_end_of_generation(int32_t id) const;  // eos, eot, <|im_end|>, <|endoftext|> ...
  // The messages as the model's chat template (tokenizer.chat_template)
  // renders them, as transformers renders it (tokenizer/chat_jinja.cpp); a
  // vocabulary without a template falls back to detect_chat_template's
  // formats. Throws kvlab::Error "chat template line N: ..." when the
  // template fails or refuses the conversation (raise_exception).
  std::string apply_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;
  std::string apply_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // Whether the chat template reads `tools`, i.e. can show the model the
  // tools it may call.
  bool chat_template_handles_tools() const;

 private:
  // The vocabulary's chat template, parsed once when the tokenizer is
  // created, or why it did not parse. A model whose template does not parse
  // still loads and completes text; apply_chat throws the error.
  void parse_chat_template();
  std::optional<jinja::Template> chat_template_;
  std::string chat_template_error_;
};

// Buffers decoded bytes and releases only complete UTF-8 code points, so a
// stream never prints half a character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);  // complete code points ready to print
  std::string flush();           // whatever remains (invalid tails as-is)
 private:
  const Tokenizer& tok_;
  std::string pending_;
};

// The chat formats of the fallback for a model without a Jinja chat template
// (tokenizer/chat.cpp says what each renders), recognised from markers in
// the template text.
enum class ChatFormat { ChatML, Gemma, Llama3 };
struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  std::string default_system;  // ChatML: the template's own system message, if any
};
ChatTemplate detect_chat_template(const std::string& jinja);
// The messages as the template renders them, ending with the assistant's
// header when `add_generation_prompt`.
std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt = true);

}  // namespace kvlab::tokenizer

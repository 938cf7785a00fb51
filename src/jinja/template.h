// A Jinja template engine for the subset that chat templates use, rendering
// as Hugging Face's transformers does (jinja2 with trim_blocks and
// lstrip_blocks, its tojson, raise_exception and strftime_now globals).
// docs/usage.md#chat-templates lists what is covered.
//
//   kvlab::jinja::Template t(source);                 // throws kvlab::Error
//   std::string text = t.render({{"messages", ...}, {"add_generation_prompt", true}});
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/ast.h"

namespace kvlab::jinja {

struct RenderOptions {
  // Bounds on one render, so that no template can run away: the text it
  // produces, and the iterations of all its loops together.
  size_t max_output_bytes = size_t(16) << 20;
  size_t max_loop_iterations = size_t(1) << 20;
  // The time strftime_now formats; the local time now when empty.
  std::optional<std::tm> now;
};

class Template {
 public:
  // Parses `source`; throws kvlab::Error "line N: ..." on a syntax error.
  explicit Template(std::string_view source);

  // The template rendered with the variables of `context` (an object).
  // Throws kvlab::Error "line N: ..." for an error in the template,
  // raise_exception's message included, and for a bound exceeded.
  std::string render(const Json& context, const RenderOptions& options = {}) const;

  // Whether the template reads a variable of this name anywhere.
  bool references(std::string_view name) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kvlab::jinja

#include "jinja/template.h"

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace kvlab::jinja {

struct Template::Impl {
  Parsed parsed;
};

Template::Template(std::string_view source) : impl_(std::make_shared<Impl>(Impl{parse(tokenize(source))})) {}

std::string Template::render(const Json& context, const RenderOptions& options) const {
  return render_body(impl_->parsed.body, context, options);
}

bool Template::references(std::string_view name) const { return impl_->parsed.names.count(name) != 0; }

}  // namespace kvlab::jinja

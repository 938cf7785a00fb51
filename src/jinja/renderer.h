// Runs a parsed template (internal to jinja/; jinja/template.h is the
// interface).
#pragma once
#include <string>

#include "jinja/ast.h"
#include "jinja/template.h"

namespace kvlab::jinja {

std::string render_body(const Body& body, const Json& context, const RenderOptions& options);

}  // namespace kvlab::jinja

// Jinja's filters (value | name(args)), tests (value is name(args)) and the
// methods templates call on strings and dicts (s.strip(), d.items(), ...),
// as jinja2 and Python define them; transformers' tojson replaces jinja2's
// (no HTML escaping, non-ASCII kept). Unknown names throw EvalError.
#pragma once
#include <string>

#include "jinja/value.h"

namespace kvlab::jinja {

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);
Value call_method(const Value& object, const std::string& name, const CallArgs& args);

}  // namespace kvlab::jinja

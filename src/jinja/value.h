// The values a template computes with: JSON data (Python's None, bool, int,
// float, str, list, dict), plus what Jinja has beyond JSON: undefined,
// namespace() objects (the one mutable value, shared by reference), and
// callables (macros and the globals raise_exception, namespace, ...).
// Conversions follow Python and jinja2, since templates are written for
// them: str() for output, repr() inside lists and dicts, truthiness, ==.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"

namespace kvlab::jinja {

class Value;

// Evaluated call arguments.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`, or null when absent.
  const Value* find(size_t index, std::string_view name) const;
  // The argument named `name` (keyword only), or null when absent.
  const Value* find_keyword(std::string_view name) const;
};

using Function = std::function<Value(CallArgs&)>;
using Namespace = std::map<std::string, Value, std::less<>>;

class Value {
 public:
  enum class Kind { Undefined, Data, Namespace, Callable };

  Value() = default;  // undefined
  Value(Json data) : kind_(Kind::Data), data_(std::make_shared<const Json>(std::move(data))) {}
  static Value undefined(std::string name) {
    Value v;
    v.undefined_name_ = std::move(name);
    return v;
  }
  static Value make_namespace(Namespace attrs) {
    Value v;
    v.kind_ = Kind::Namespace;
    v.namespace_ = std::make_shared<Namespace>(std::move(attrs));
    return v;
  }
  static Value callable(Function f) {
    Value v;
    v.kind_ = Kind::Callable;
    v.function_ = std::make_shared<Function>(std::move(f));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_data() const { return kind_ == Kind::Data; }
  const Json& data() const;  // null unless is_data()
  Namespace& attrs() const { return *namespace_; }
  const Function& function() const { return *function_; }
  // The name an undefined value was looked up by, for error messages.
  const std::string& undefined_name() const { return undefined_name_; }

  bool truthy() const;
  // Python's str(): what {{ value }} prints.
  std::string str() const;
  // The JSON a value stands for, for tojson and for storing in lists;
  // throws for an undefined value, a namespace or a callable.
  const Json& as_data(const char* what) const;

 private:
  Kind kind_ = Kind::Undefined;
  // Shared, never modified: copying a value (a variable lookup, a loop item)
  // costs no copy of the data, which can be the whole conversation.
  std::shared_ptr<const Json> data_;
  std::string undefined_name_;
  std::shared_ptr<Namespace> namespace_;
  std::shared_ptr<Function> function_;
};

// An optional argument left out or given as None.
bool absent_or_none(const Value* v);

// Python's repr() of JSON data: 'a', True, None, [1, 'b'], {'k': 2}.
std::string python_repr(const Json& j);
// Python's str() of JSON data: strings bare, everything else as repr().
std::string python_str(const Json& j);
// Python's truthiness.
bool python_truthy(const Json& j);
// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent),
// so ", " and ": " separators without indent, "," and ": " with it.
std::string to_json_text(const Json& j, int indent = -1);

// Code point boundaries of UTF-8 text (Python indexes str by code points):
// offsets of every code point's first byte, then text.size().
std::vector<size_t> code_point_offsets(const std::string& text);

}  // namespace kvlab::jinja

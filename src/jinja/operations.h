// Jinja's operators and accessors over values, with Python's semantics
// (jinja2 evaluates them as Python): arithmetic, comparison, membership,
// a.b / a[i] / a[i:j:k], and iteration. Errors throw EvalError.
#pragma once
#include <string>
#include <vector>

#include "jinja/value.h"

namespace kvlab::jinja {

// No value a template builds may grow past this (a string's bytes, plus 64
// bytes per list or dict element), so that a template cannot ask for
// gigabytes, e.g. by doubling a string or a list in a loop.
inline constexpr size_t kMaxValueBytes = size_t(16) << 20;
// Throws EvalError when `j` is larger than kMaxValueBytes.
void check_value_size(const Json& j);

// + - * / // % ** ~ == != < <= > >= in, "not in" (not and/or, which short-circuit).
Value binary_op(const std::string& op, const Value& lhs, const Value& rhs);
Value negate(const Value& v);
bool values_equal(const Value& a, const Value& b);

// a.name: a dict's key or a namespace's attribute, else undefined.
Value get_attr(const Value& object, const std::string& name);
// a[index]: a list's or string's element (negative indexes count from the
// end), a dict's key; undefined when absent.
Value get_item(const Value& object, const Value& index);
// a[start:stop:step] of a list or string; null parts are omitted ones.
Value slice(const Value& object, const Value* start, const Value* stop, const Value* step);

// The items a for loop visits: a list's elements, a dict's keys, a
// string's characters; nothing for undefined.
std::vector<Json> iterate(const Value& v);
// Python's len().
size_t length(const Value& v);

// Python's name of a value's type, for error messages.
std::string type_name(const Value& v);

// An integer argument (bools and whole floats are not accepted, as Python).
int64_t to_integer(const Value& v, const char* what);

}  // namespace kvlab::jinja

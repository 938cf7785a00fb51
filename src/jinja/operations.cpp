#include "jinja/operations.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "jinja/error.h"

namespace kvlab::jinja {
std::string type_name(const Value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.kind() == Value::Kind::Namespace) return "Namespace";
  if (v.kind() == Value::Kind::Callable) return "function";
  switch (v.data().type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "int";
  }
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw EvalError("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Python's bool is an int: True + 1 == 2.
bool is_int(const Json& j) { return j.is_number_integer() || j.is_number_unsigned() || j.is_boolean(); }
bool is_number(const Json& j) { return is_int(j) || j.is_number_float(); }
int64_t int_of(const Json& j) { return j.is_boolean() ? int64_t(j.get<bool>()) : j.get<int64_t>(); }
double float_of(const Json& j) { return j.is_number_float() ? j.get<double>() : double(int_of(j)); }

// Python's floor division and modulo: the quotient rounds down, the
// remainder takes the divisor's sign.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// Integers are exact, as Python's; where Python's would grow past 64 bits,
// the template fails instead.
void fail_on_overflow(bool overflowed) {
  if (overflowed) throw EvalError("integer overflow");
}

Value int_arithmetic(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") return fail_on_overflow(__builtin_add_overflow(x, y, &r)), Json(r);
  if (op == "-") return fail_on_overflow(__builtin_sub_overflow(x, y, &r)), Json(r);
  if (op == "*") return fail_on_overflow(__builtin_mul_overflow(x, y, &r)), Json(r);
  if (op == "**") {
    if (y < 0) return Json(std::pow(double(x), double(y)));  // Python gives a float
    r = 1;
    for (int64_t base = x, e = y; e > 0; e >>= 1) {
      if (e & 1) fail_on_overflow(__builtin_mul_overflow(r, base, &r));
      if (e > 1) fail_on_overflow(__builtin_mul_overflow(base, base, &base));
    }
    return Json(r);
  }
  if (y == 0) throw EvalError("integer division or modulo by zero");
  fail_on_overflow(x == INT64_MIN && y == -1);
  return Json(op == "//" ? floor_div(x, y) : floor_mod(x, y));
}

Value arithmetic(const std::string& op, const Json& a, const Json& b) {
  if (is_int(a) && is_int(b) && op != "/") return int_arithmetic(op, int_of(a), int_of(b));
  const double x = float_of(a), y = float_of(b);
  if ((op == "/" || op == "//" || op == "%") && y == 0) throw EvalError("float division by zero");
  if (op == "+") return Json(x + y);
  if (op == "-") return Json(x - y);
  if (op == "*") return Json(x * y);
  if (op == "/") return Json(x / y);
  if (op == "//") return Json(std::floor(x / y));
  if (op == "%") return Json(x - std::floor(x / y) * y);
  return Json(std::pow(x, y));
}

// The bytes check_value_size counts for `j`, counting down from `budget`;
// stops below zero.
int64_t remaining_budget(const Json& j, int64_t budget) {
  budget -= 64;  // roughly what one element costs in memory
  if (j.is_string()) return budget - int64_t(j.get_ref<const std::string&>().size());
  if (!j.is_structured()) return budget;
  for (auto it = j.begin(); it != j.end() && budget >= 0; ++it) {
    if (j.is_object()) budget -= int64_t(it.key().size());
    budget = remaining_budget(it.value(), budget);
  }
  return budget;
}

Value repeat(const Json& seq, int64_t times) {
  const size_t n = times > 0 ? size_t(times) : 0;
  const int64_t unit = int64_t(kMaxValueBytes) - remaining_budget(seq, int64_t(kMaxValueBytes));
  if (n > 0 && uint64_t(unit) > kMaxValueBytes / n) throw EvalError("value too large (repetition)");
  if (seq.is_string()) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += seq.get_ref<const std::string&>();
    return Json(out);
  }
  Json out = Json::array();
  for (size_t i = 0; i < n; ++i)
    for (const Json& item : seq) out.push_back(item);
  return out;
}

Value concatenate(const std::string& a, const std::string& b) {
  if (a.size() + b.size() > kMaxValueBytes) throw EvalError("value too large (string concatenation)");
  return Json(a + b);
}

Value add(const Value& lhs, const Value& rhs) {
  const Json &a = lhs.data(), &b = rhs.data();
  if (a.is_string() && b.is_string())
    return concatenate(a.get_ref<const std::string&>(), b.get_ref<const std::string&>());
  if (a.is_array() && b.is_array()) {
    Json out = a;
    for (const Json& item : b) out.push_back(item);
    check_value_size(out);
    return out;
  }
  if (is_number(a) && is_number(b)) return arithmetic("+", a, b);
  unsupported("+", lhs, rhs);
}

Value multiply(const Value& lhs, const Value& rhs) {
  const Json &a = lhs.data(), &b = rhs.data();
  if ((a.is_string() || a.is_array()) && is_int(b)) return repeat(a, int_of(b));
  if ((b.is_string() || b.is_array()) && is_int(a)) return repeat(b, int_of(a));
  if (is_number(a) && is_number(b)) return arithmetic("*", a, b);
  unsupported("*", lhs, rhs);
}

// Python's ordering: numbers by value, strings by code point (which UTF-8
// byte order preserves), lists element by element.
int compare(const Value& lhs, const Value& rhs, const std::string& op) {
  if (!lhs.is_data() || !rhs.is_data()) unsupported(op, lhs, rhs);
  const Json &a = lhs.data(), &b = rhs.data();
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
    return float_of(a) < float_of(b) ? -1 : float_of(a) > float_of(b);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (values_equal(Value(a[i]), Value(b[i]))) continue;
      return compare(Value(a[i]), Value(b[i]), op);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size();
  }
  unsupported(op, lhs, rhs);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  const Json& c = container.as_data("'in'");
  if (c.is_string()) {
    if (!item.is_data() || !item.data().is_string())
      throw EvalError("'in <string>' requires string as left operand, not " + type_name(item));
    return c.get_ref<const std::string&>().find(item.data().get_ref<const std::string&>()) != std::string::npos;
  }
  if (c.is_array()) {
    for (const Json& e : c)
      if (values_equal(Value(e), item)) return true;
    return false;
  }
  if (c.is_object()) return item.is_data() && item.data().is_string() && c.contains(item.data().get<std::string>());
  throw EvalError("argument of type '" + type_name(container) + "' is not iterable");
}

// Python's index normalisation for a sequence of `size` elements.
bool normalize_index(int64_t& i, size_t size) {
  if (i < 0) i += int64_t(size);
  return i >= 0 && i < int64_t(size);
}

}  // namespace

void check_value_size(const Json& j) {
  if (remaining_budget(j, int64_t(kMaxValueBytes)) < 0) throw EvalError("value too large");
}

bool values_equal(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined: return true;
    case Value::Kind::Namespace: return &a.attrs() == &b.attrs();
    case Value::Kind::Callable: return &a.function() == &b.function();
    case Value::Kind::Data: break;
  }
  const Json &x = a.data(), &y = b.data();
  if (is_number(x) && is_number(y))
    return float_of(x) == float_of(y) && (!is_int(x) || !is_int(y) || int_of(x) == int_of(y));
  return x == y;
}

Value binary_op(const std::string& op, const Value& lhs, const Value& rhs) {
  if (op == "~") return concatenate(lhs.str(), rhs.str());
  if (op == "==") return Json(values_equal(lhs, rhs));
  if (op == "!=") return Json(!values_equal(lhs, rhs));
  if (op == "in") return Json(contains(rhs, lhs));
  if (op == "not in") return Json(!contains(rhs, lhs));
  if (op == "<") return Json(compare(lhs, rhs, op) < 0);
  if (op == "<=") return Json(compare(lhs, rhs, op) <= 0);
  if (op == ">") return Json(compare(lhs, rhs, op) > 0);
  if (op == ">=") return Json(compare(lhs, rhs, op) >= 0);
  if (!lhs.is_data() || !rhs.is_data()) unsupported(op, lhs, rhs);
  if (op == "+") return add(lhs, rhs);
  if (op == "*") return multiply(lhs, rhs);
  if (!is_number(lhs.data()) || !is_number(rhs.data())) unsupported(op, lhs, rhs);
  return arithmetic(op, lhs.data(), rhs.data());
}

Value negate(const Value& v) {
  if (!v.is_data() || !is_number(v.data())) throw EvalError("bad operand type for unary -: '" + type_name(v) + "'");
  if (is_int(v.data())) {
    fail_on_overflow(int_of(v.data()) == INT64_MIN);
    return Json(-int_of(v.data()));
  }
  return Json(-v.data().get<double>());
}

Value get_attr(const Value& object, const std::string& name) {
  if (object.kind() == Value::Kind::Namespace) {
    const auto it = object.attrs().find(name);
    return it == object.attrs().end() ? Value::undefined(name) : it->second;
  }
  const Json& o = object.as_data("attribute access");
  if (o.is_object()) {
    const auto it = o.find(name);
    if (it != o.end()) return *it;
  }
  return Value::undefined(name);
}

Value get_item(const Value& object, const Value& index) {
  if (object.kind() == Value::Kind::Namespace && index.is_data() && index.data().is_string())
    return get_attr(object, index.data().get<std::string>());
  const Json& o = object.as_data("subscript");
  const Json& i = index.as_data("subscript");
  if (o.is_object()) {
    if (i.is_string()) {
      const auto it = o.find(i.get<std::string>());
      if (it != o.end()) return *it;
    }
    return Value::undefined(python_str(i));
  }
  if ((o.is_array() || o.is_string()) && is_int(i)) {
    int64_t k = int_of(i);
    if (o.is_array()) return normalize_index(k, o.size()) ? Value(o[size_t(k)]) : Value::undefined(python_str(i));
    const std::string& s = o.get_ref<const std::string&>();
    const std::vector<size_t> at = code_point_offsets(s);
    if (!normalize_index(k, at.size() - 1)) return Value::undefined(python_str(i));
    return Json(s.substr(at[size_t(k)], at[size_t(k) + 1] - at[size_t(k)]));
  }
  return Value::undefined(python_str(i));
}

Value slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  const Json& o = object.as_data("slice");
  if (!o.is_array() && !o.is_string()) throw EvalError("'" + type_name(object) + "' object is not subscriptable");
  const bool is_string = o.is_string();
  const std::vector<size_t> at =
      is_string ? code_point_offsets(o.get_ref<const std::string&>()) : std::vector<size_t>{};
  const int64_t n = is_string ? int64_t(at.size()) - 1 : int64_t(o.size());
  const auto part = [](const Value* v) { return !absent_or_none(v); };
  const int64_t k = part(step) ? to_integer(*step, "slice step") : 1;
  if (k == 0) throw EvalError("slice step cannot be zero");
  // Python's slice.indices(): clamp the bounds into the sequence.
  const auto bound = [&](const Value* v, int64_t fallback) {
    if (!part(v)) return fallback;
    int64_t b = to_integer(*v, "slice index");
    if (b < 0) b += n;
    return k > 0 ? std::clamp<int64_t>(b, 0, n) : std::clamp<int64_t>(b, -1, n - 1);
  };
  const int64_t from = bound(start, k > 0 ? 0 : n - 1), to = bound(stop, k > 0 ? n : -1);
  Json out = is_string ? Json("") : Json::array();
  for (int64_t i = from; k > 0 ? i < to : i > to; i += k) {
    if (is_string)
      out.get_ref<std::string&>() +=
          o.get_ref<const std::string&>().substr(at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]);
    else
      out.push_back(o[size_t(i)]);
  }
  return out;
}

std::vector<Json> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  const Json& j = v.as_data("a for loop");
  std::vector<Json> items;
  if (j.is_array()) {
    items.assign(j.begin(), j.end());
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key());
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    const std::vector<size_t> at = code_point_offsets(s);
    for (size_t i = 0; i + 1 < at.size(); ++i) items.emplace_back(s.substr(at[i], at[i + 1] - at[i]));
  } else {
    throw EvalError("'" + type_name(v) + "' object is not iterable");
  }
  return items;
}

size_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  const Json& j = v.as_data("length");
  if (j.is_string()) return code_point_offsets(j.get_ref<const std::string&>()).size() - 1;
  if (j.is_array() || j.is_object()) return j.size();
  throw EvalError("object of type '" + type_name(v) + "' has no len()");
}

int64_t to_integer(const Value& v, const char* what) {
  if (!v.is_data() || !(v.data().is_number_integer() || v.data().is_number_unsigned()))
    throw EvalError(std::string(what) + " must be an integer, not '" + type_name(v) + "'");
  return v.data().get<int64_t>();
}

}  // namespace kvlab::jinja

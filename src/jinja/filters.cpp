#include "jinja/filters.h"

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>

#include "jinja/error.h"
#include "jinja/operations.h"
#include "jinja/strings.h"

namespace kvlab::jinja {
namespace {

using Filter = std::function<Value(const Value&, const CallArgs&)>;
using Test = std::function<bool(const Value&, const CallArgs&)>;

std::string string_arg(const CallArgs& args, size_t index, std::string_view name, const std::string& fallback) {
  const Value* v = args.find(index, name);
  return absent_or_none(v) ? fallback : v->str();
}

const Value& required_arg(const CallArgs& args, size_t index, std::string_view name, const std::string& what) {
  const Value* v = args.find(index, name);
  if (!v) throw EvalError(what + " needs the argument '" + std::string(name) + "'");
  return *v;
}

// jinja2's attribute getter: "a.b.0" looks up a, then b, then item 0.
Value lookup_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    // An all-digit part is a list index (jinja2's make_attrgetter), unless
    // it is too long to be one.
    const bool numeric = !part.empty() && part.size() < 18 && part.find_first_not_of("0123456789") == std::string::npos;
    v = get_item(v, numeric ? Value(Json(std::stoll(part))) : Value(Json(part)));
    if (dot == std::string::npos) return v;
    from = dot + 1;
  }
}

// The arguments after the first `skip` positional ones, for a test or
// filter that select/map apply to each item.
CallArgs rest_of(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

// select / reject / selectattr / rejectattr.
Value select_items(const Value& seq, const CallArgs& args, bool by_attribute, bool keep_when) {
  const std::string attribute = by_attribute ? required_arg(args, 0, "attribute", "selectattr").str() : "";
  const size_t test_at = by_attribute ? 1 : 0;
  const Value* test = test_at < args.positional.size() ? &args.positional[test_at] : nullptr;
  const CallArgs test_args = rest_of(args, test_at + 1);
  Json out = Json::array();
  for (Json& item : iterate(seq)) {
    const Value subject = by_attribute ? lookup_path(Value(item), attribute) : Value(item);
    const bool passes = test ? apply_test(test->str(), subject, test_args) : subject.truthy();
    if (passes == keep_when) out.push_back(std::move(item));
  }
  return out;
}

Value map_items(const Value& seq, const CallArgs& args) {
  Json out = Json::array();
  const Value* attribute = args.find_keyword("attribute");
  for (const Json& item : iterate(seq)) {
    Value mapped;
    if (attribute) {
      mapped = lookup_path(Value(item), attribute->str());
      if (mapped.is_undefined()) {
        const Value* fallback = args.find_keyword("default");
        if (fallback) mapped = *fallback;
      }
    } else {
      mapped = apply_filter(required_arg(args, 0, "filter", "map").str(), Value(item), rest_of(args, 1));
    }
    out.push_back(mapped.as_data("map"));
  }
  return out;
}

Value join(const Value& seq, const CallArgs& args) {
  const std::string separator = string_arg(args, 0, "d", "");
  const Value* attribute = args.find(1, "attribute");
  std::string out;
  bool first = true;
  for (const Json& item : iterate(seq)) {
    if (!first) out += separator;
    first = false;
    out += absent_or_none(attribute) ? python_str(item) : lookup_path(Value(item), attribute->str()).str();
  }
  return Json(out);
}

// jinja2's title filter: each word, after whitespace or one of -({[<,
// starts upper case and continues lower case.
Value title(const Value& v) {
  std::string s = v.str();
  bool word_start = true;
  for (char& c : s) {
    const bool separator = is_python_space(c) || std::string_view("-({[<").find(c) != std::string_view::npos;
    if (!separator) c = word_start ? upper_ascii(c) : lower_ascii(c);
    word_start = separator;
  }
  return Json(s);
}

Value first_or_last(const Value& v, bool last) {
  const std::vector<Json> items = iterate(v);
  if (items.empty()) return Value::undefined(last ? "last item" : "first item");
  return last ? items.back() : items.front();
}

// Python's int() of a number or a decimal string, with the filter's
// default for anything else.
Value to_int(const Value& v, const CallArgs& args) {
  const Value* fallback = args.find(0, "default");
  const Json& j = v.data();
  if (j.is_boolean()) return Json(int64_t(j.get<bool>()));
  if (j.is_number_float()) return Json(int64_t(j.get<double>()));
  if (j.is_number()) return j;
  if (j.is_string()) {
    const std::string s = strip(j.get_ref<const std::string&>(), "", true, true);
    char* end = nullptr;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size()) return Json(int64_t(n));
  }
  return fallback ? *fallback : Value(Json(0));
}

Value to_float(const Value& v, const CallArgs& args) {
  const Value* fallback = args.find(0, "default");
  const Json& j = v.data();
  if (j.is_number() || j.is_boolean()) return Json(j.is_boolean() ? double(j.get<bool>()) : j.get<double>());
  if (j.is_string()) {
    const std::string s = strip(j.get_ref<const std::string&>(), "", true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Json(d);
  }
  return fallback ? *fallback : Value(Json(0.0));
}

Value items_of(const Value& v) {
  Json out = Json::array();
  if (v.is_undefined()) return out;
  const Json& j = v.as_data("items");
  if (!j.is_object()) throw EvalError("can only get item pairs from a mapping");
  for (auto it = j.begin(); it != j.end(); ++it) out.push_back(Json::array({it.key(), it.value()}));
  return out;
}

// jinja2's indent: every line but the first (unless `first`) gets `width`
// spaces, blank lines none (unless `blank`).
Value indent(const Value& v, const CallArgs& args) {
  const Value* width_arg = args.find(0, "width");
  const std::string pad = width_arg && width_arg->data().is_string()
                              ? width_arg->str()
                              : std::string(size_t(width_arg ? to_integer(*width_arg, "indent width") : 4), ' ');
  const Value* first = args.find(1, "first");
  const Value* blank = args.find(2, "blank");
  const std::string s = v.str();
  std::string out;
  size_t from = 0;
  for (bool first_line = true;; first_line = false) {
    const size_t nl = s.find('\n', from);
    const std::string line = s.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
    const bool pad_it = (!first_line || (first && first->truthy())) && (!line.empty() || (blank && blank->truthy()));
    out += (pad_it ? pad : "") + line;
    if (nl == std::string::npos) break;
    out += '\n';
    from = nl + 1;
  }
  return Json(out);
}

Value tojson(const Value& v, const CallArgs& a) {
  const Value* indent_arg = a.find(0, "indent");
  const int indent_width = absent_or_none(indent_arg) ? -1 : int(to_integer(*indent_arg, "indent"));
  return Json(to_json_text(v.as_data("tojson"), indent_width));
}

// jinja2's default(default_value='', boolean=False): the fallback for an
// undefined value, or with `boolean` for any false one.
Value default_value(const Value& v, const CallArgs& a) {
  const Value* boolean = a.find(1, "boolean");
  const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
  const Value* fallback = a.find(0, "default_value");
  return use_default ? (fallback ? *fallback : Value(Json(""))) : v;
}

Value replace_filter(const Value& v, const CallArgs& a) {
  const Value* count = a.find(2, "count");
  return Json(replace(v.str(), required_arg(a, 0, "old", "replace").str(), required_arg(a, 1, "new", "replace").str(),
                      absent_or_none(count) ? -1 : to_integer(*count, "count")));
}

Value absolute(const Value& v, const CallArgs&) {
  const Json& j = v.as_data("abs");
  if (j.is_number_float()) return Json(std::abs(j.get<double>()));
  const int64_t i = to_integer(v, "abs");
  if (i == INT64_MIN) throw EvalError("integer overflow");
  return Json(i < 0 ? -i : i);
}

Value reverse(const Value& v, const CallArgs&) {
  std::vector<Json> items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.data().is_string()) return Json(items);
  std::string out;
  for (const Json& c : items) out += c.get<std::string>();
  return Json(out);
}

// A filter of the value's str() alone.
template <std::string (*F)(std::string)>
Value string_filter(const Value& v, const CallArgs&) {
  return Json(F(v.str()));
}

std::string as_string(std::string s) { return s; }

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"trim",
       [](const Value& v, const CallArgs& a) {
         return Value(Json(strip(v.str(), string_arg(a, 0, "chars", ""), true, true)));
       }},
      {"tojson", tojson},
      {"length", [](const Value& v, const CallArgs&) { return Value(Json(length(v))); }},
      {"count", [](const Value& v, const CallArgs&) { return Value(Json(length(v))); }},
      {"upper", string_filter<to_upper>},
      {"lower", string_filter<to_lower>},
      {"capitalize", string_filter<capitalize>},
      {"string", string_filter<as_string>},
      {"title", [](const Value& v, const CallArgs&) { return title(v); }},
      {"default", default_value},
      {"join", join},
      {"first", [](const Value& v, const CallArgs&) { return first_or_last(v, false); }},
      {"last", [](const Value& v, const CallArgs&) { return first_or_last(v, true); }},
      {"replace", replace_filter},
      {"items", [](const Value& v, const CallArgs&) { return items_of(v); }},
      {"selectattr", [](const Value& v, const CallArgs& a) { return select_items(v, a, true, true); }},
      {"rejectattr", [](const Value& v, const CallArgs& a) { return select_items(v, a, true, false); }},
      {"select", [](const Value& v, const CallArgs& a) { return select_items(v, a, false, true); }},
      {"reject", [](const Value& v, const CallArgs& a) { return select_items(v, a, false, false); }},
      {"map", map_items},
      {"int", to_int},
      {"float", to_float},
      {"safe", [](const Value& v, const CallArgs&) { return v; }},
      {"list", [](const Value& v, const CallArgs&) { return Value(Json(iterate(v))); }},
      {"indent", indent},
      {"abs", absolute},
      {"reverse", reverse},
  };
  return table;
}

bool is_int_data(const Value& v) {
  return v.is_data() && (v.data().is_number_integer() || v.data().is_number_unsigned());
}

const std::map<std::string, Test, std::less<>>& tests() {
  const auto compare_with = [](const char* op) {
    return Test([op](const Value& v, const CallArgs& a) {
      return binary_op(op, v, required_arg(a, 0, "other", std::string("test '") + op + "'")).truthy();
    });
  };
  static const std::map<std::string, Test, std::less<>> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_data() && v.data().is_null(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_data() && v.data().is_string(); }},
      {"number",
       [](const Value& v, const CallArgs&) { return v.is_data() && (v.data().is_number() || v.data().is_boolean()); }},
      {"integer", [](const Value& v, const CallArgs&) { return is_int_data(v); }},
      {"float", [](const Value& v, const CallArgs&) { return v.is_data() && v.data().is_number_float(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_data() && v.data().is_boolean(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_data() && v.data() == Json(true); }},
      {"false", [](const Value& v, const CallArgs&) { return v.is_data() && v.data() == Json(false); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_data() && v.data().is_object(); }},
      {"iterable",
       [](const Value& v, const CallArgs&) {
         return v.is_undefined() || (v.is_data() && (v.data().is_string() || v.data().is_structured()));
       }},
      {"sequence", [](const Value& v,
                      const CallArgs&) { return v.is_data() && (v.data().is_string() || v.data().is_structured()); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::Callable; }},
      {"equalto", compare_with("==")},
      {"eq", compare_with("==")},
      {"==", compare_with("==")},
      {"ne", compare_with("!=")},
      {"!=", compare_with("!=")},
      {"lt", compare_with("<")},
      {"<", compare_with("<")},
      {"le", compare_with("<=")},
      {"<=", compare_with("<=")},
      {"gt", compare_with(">")},
      {">", compare_with(">")},
      {"ge", compare_with(">=")},
      {">=", compare_with(">=")},
      {"in", compare_with("in")},
      {"sameas", compare_with("==")},
      {"odd", [](const Value& v, const CallArgs&) { return to_integer(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, const CallArgs&) { return to_integer(v, "even") % 2 == 0; }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const int64_t d = to_integer(required_arg(a, 0, "num", "divisibleby"), "divisibleby");
         if (d == 0) throw EvalError("integer division or modulo by zero");
         return to_integer(v, "divisibleby") % d == 0;
       }},
      {"lower", [](const Value& v, const CallArgs&) { return v.str() == to_lower(v.str()); }},
      {"upper", [](const Value& v, const CallArgs&) { return v.str() == to_upper(v.str()); }},
  };
  return table;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args) {
  const auto& table = filters();
  const std::string canonical = name == "d" ? "default" : name;
  const auto it = table.find(canonical);
  if (it == table.end()) throw EvalError("unknown filter '" + name + "'");
  return it->second(value, args);
}

bool apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  const auto& table = tests();
  const auto it = table.find(name);
  if (it == table.end()) throw EvalError("unknown test '" + name + "'");
  return it->second(value, args);
}

}  // namespace kvlab::jinja

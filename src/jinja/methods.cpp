// The Python methods chat templates call on strings and dicts (declared in
// jinja/filters.h with the filters they resemble).
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/operations.h"
#include "jinja/strings.h"

namespace kvlab::jinja {
namespace {

// str.split(sep, maxsplit): without a separator, runs of whitespace split
// and leading/trailing whitespace yields no empty parts.
Json split(const std::string& s, const CallArgs& args) {
  const Value* sep = args.find(0, "sep");
  const Value* max_arg = args.find(1, "maxsplit");
  const int64_t max_splits = absent_or_none(max_arg) ? -1 : to_integer(*max_arg, "maxsplit");
  Json parts = Json::array();
  if (absent_or_none(sep)) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_python_space(s[i])) ++i;
      if (i == s.size()) break;
      if (max_splits >= 0 && int64_t(parts.size()) == max_splits) {
        parts.push_back(strip(std::string_view(s).substr(i), "", false, true));
        break;
      }
      size_t end = i;
      while (end < s.size() && !is_python_space(s[end])) ++end;
      parts.push_back(s.substr(i, end - i));
      i = end;
    }
    return parts;
  }
  const std::string separator = sep->str();
  if (separator.empty()) throw EvalError("empty separator");
  size_t from = 0;
  for (size_t at;
       (max_splits < 0 || int64_t(parts.size()) < max_splits) && (at = s.find(separator, from)) != std::string::npos;
       from = at + separator.size())
    parts.push_back(s.substr(from, at - from));
  parts.push_back(s.substr(from));
  return parts;
}

// str.startswith / str.endswith: the argument may be a tuple (a list here)
// of candidates.
bool affix_matches(const std::string& s, const Value& affixes, bool prefix) {
  const auto matches = [&](const std::string& a) {
    return a.size() <= s.size() &&
           (prefix ? s.compare(0, a.size(), a) : s.compare(s.size() - a.size(), a.size(), a)) == 0;
  };
  if (affixes.is_data() && affixes.data().is_array()) {
    for (const Json& a : affixes.data())
      if (a.is_string() && matches(a.get<std::string>())) return true;
    return false;
  }
  if (!affixes.is_data() || !affixes.data().is_string())
    throw EvalError(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str");
  return matches(affixes.data().get<std::string>());
}

// Python's str.title(): a letter after a letter is lower case, any other
// letter upper case.
std::string python_title(std::string s) {
  bool after_letter = false;
  for (char& c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = after_letter ? lower_ascii(c) : upper_ascii(c);
    after_letter = letter;
  }
  return s;
}

const Value& argument(const CallArgs& args, size_t index, const std::string& method) {
  if (index >= args.positional.size())
    throw EvalError(method + "() takes at least " + std::to_string(index + 1) + " argument(s)");
  return args.positional[index];
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& args) {
  const Value* chars = args.find(0, "chars");
  const std::string strip_chars = absent_or_none(chars) ? "" : chars->str();
  if (name == "strip") return Json(strip(s, strip_chars, true, true));
  if (name == "lstrip") return Json(strip(s, strip_chars, true, false));
  if (name == "rstrip") return Json(strip(s, strip_chars, false, true));
  if (name == "split") return split(s, args);
  if (name == "startswith") return Json(affix_matches(s, argument(args, 0, name), true));
  if (name == "endswith") return Json(affix_matches(s, argument(args, 0, name), false));
  if (name == "upper") return Json(to_upper(s));
  if (name == "lower") return Json(to_lower(s));
  if (name == "title") return Json(python_title(s));
  if (name == "capitalize") return Json(capitalize(s));
  if (name == "replace") {
    const Value* count = args.find(2, "count");
    return Json(replace(s, argument(args, 0, name).str(), argument(args, 1, name).str(),
                        absent_or_none(count) ? -1 : to_integer(*count, "count")));
  }
  if (name == "find") {
    const size_t at = s.find(argument(args, 0, name).str());
    return Json(at == std::string::npos ? int64_t(-1) : int64_t(code_point_offsets(s.substr(0, at)).size() - 1));
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Json& item : iterate(argument(args, 0, name))) {
      if (!first) out += s;
      first = false;
      out += python_str(item);
    }
    return Json(out);
  }
  throw EvalError("'str' object has no attribute '" + name + "'");
}

Value dict_method(const Json& d, const std::string& name, const CallArgs& args) {
  if (name == "get") {
    const Value& key = argument(args, 0, name);
    if (key.is_data() && key.data().is_string()) {
      const auto it = d.find(key.data().get<std::string>());
      if (it != d.end()) return *it;
    }
    return args.positional.size() > 1 ? args.positional[1] : Value(Json(nullptr));
  }
  Json out = Json::array();
  for (auto it = d.begin(); it != d.end(); ++it) {
    if (name == "items")
      out.push_back(Json::array({it.key(), it.value()}));
    else if (name == "keys")
      out.push_back(it.key());
    else if (name == "values")
      out.push_back(it.value());
    else
      throw EvalError("'dict' object has no attribute '" + name + "'");
  }
  if (d.empty() && name != "items" && name != "keys" && name != "values")
    throw EvalError("'dict' object has no attribute '" + name + "'");
  return out;
}

}  // namespace

Value call_method(const Value& object, const std::string& name, const CallArgs& args) {
  const Json& o = object.as_data("a method call");
  if (o.is_string()) return string_method(o.get_ref<const std::string&>(), name, args);
  if (o.is_object()) return dict_method(o, name, args);
  throw EvalError("'" + type_name(object) + "' object has no attribute '" + name + "'");
}

}  // namespace kvlab::jinja

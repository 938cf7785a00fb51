#include "grammar/json_schema.h"

#include <map>
#include <set>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "grammar/regex.h"

namespace kvlab::grammar {
namespace {

using json = nlohmann::ordered_json;

// Between two tokens: nothing, a space, or a newline and some indentation.
const char* kSpaceRule = "schema-ws ::= (\" \" | \"\\n\" \" \"{0,16})?\n";
const std::string kSp = " schema-ws ";
const std::string kQuote = "\"\\\"\"";  // the GBNF literal of one '"'

// Keywords that only describe, and those compiled.
bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$defs", "definitions", "discriminator", "contentMediaType"};
  return kAnnotations.count(key) > 0;
}

bool is_supported(const std::string& key) {
  static const std::set<std::string> kSupported = {
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
      "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format", "not"};
  return kSupported.count(key) > 0;
}

// GBNF for the string formats kept (RFC 3339 section 5.6; RFC 4122).
const std::map<std::string, std::string>& formats() {
  static const std::map<std::string, std::string> kFormats = {
      {"date", "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])"},
      {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
      {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
  };
  return kFormats;
}

// A schema no value satisfies: always an error, but an anyOf branch or an
// optional property that is one is only dropped.
struct Unsatisfiable : Error {
  using Error::Error;
};

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, bool strict, std::string name) : root_(root), strict_(strict), name_(std::move(name)) {}

  std::string run() {
    const std::string top = value(root_, "#");
    return name_ + " ::= " + top + "\n" + rules_;
  }

 private:
  [[noreturn]] void unsatisfiable(const std::string& path, const std::string& why) const {
    throw Unsatisfiable("json_schema: no value satisfies the schema at " + path + ": " + why);
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& what) const {
    throw Error("json_schema: " + what + " at " + path + " is not supported");
  }

  std::string define(const std::string& body) {
    const std::string name = name_ + "-" + std::to_string(next_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  void check_keywords(const json& s, const std::string& path) const {
    if (!strict_) return;
    for (const auto& [key, v] : s.items())
      if (!is_supported(key) && !is_annotation(key)) unsupported(path, "keyword '" + key + "'");
  }

  // The rule name of a schema (or an expression for the trivial ones).
  std::string value(const json& s, const std::string& path) {
    if (depth_ >= kMaxNesting)
      throw Error("json_schema: schemas nested more than " + std::to_string(kMaxNesting) + " deep at " + path);
    ++depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    return compile_value(s, path);
  }

  std::string compile_value(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) unsatisfiable(path, "the schema is false");
      return "json-value-0";
    }
    if (!s.is_object()) throw Error("json_schema: the schema at " + path + " must be an object or a boolean");
    check_keywords(s, path);
    if (s.contains("not")) {
      const json& n = s["not"];
      if ((n.is_object() && n.empty()) || (n.is_boolean() && n.get<bool>())) unsatisfiable(path, "'not' of everything");
      if (strict_) unsupported(path + "/not", "'not' of a schema other than {}");
    }
    if (s.contains("$ref")) return reference(s["$ref"], path);
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) unsupported(path + "/allOf", "allOf of more than one schema");
      return value(s["allOf"][0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return alternatives(s[key], path + "/" + key);
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) return enumeration(s["enum"], path + "/enum");
    return typed(s, path);
  }

  std::string reference(const json& ref, const std::string& path) {
    if (!ref.is_string()) throw Error("json_schema: $ref at " + path + " must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target != "#" && target.rfind("#/$defs/", 0) != 0 && target.rfind("#/definitions/", 0) != 0)
      unsupported(path + "/$ref", "$ref '" + target + "' (only \"#\", \"#/$defs/...\" and \"#/definitions/...\")");
    const json::json_pointer pointer(target.substr(1));
    if (!root_.contains(pointer)) throw Error("json_schema: $ref '" + target + "' at " + path + " points at nothing");
    const std::string name = name_ + "-ref-" + std::to_string(next_++);
    refs_[target] = name;  // before compiling it: a recursive schema refers to itself by this name
    rules_ += name + " ::= " + value(root_.at(pointer), target) + "\n";
    return name;
  }

  std::string alternatives(const json& list, const std::string& path) {
    if (!list.is_array()) throw Error("json_schema: " + path + " must be an array");
    std::string body;
    for (size_t i = 0; i < list.size(); ++i) {
      try {
        const std::string alt = value(list[i], path + "/" + std::to_string(i));
        body += (body.empty() ? "" : " | ") + alt;
      } catch (const Unsatisfiable&) {
        // a branch nothing satisfies adds nothing
      }
    }
    if (body.empty()) unsatisfiable(path, "no branch is satisfiable");
    return define(body);
  }

  std::string enumeration(const json& values, const std::string& path) {
    if (!values.is_array()) throw Error("json_schema: " + path + " must be an array");
    if (values.empty()) unsatisfiable(path, "enum is empty");
    std::string body;
    for (const json& v : values) body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
    return define(body);
  }

  std::string typed(const json& s, const std::string& path) {
    if (!s.contains("type")) return untyped(s, path);
    const json& t = s["type"];
    if (t.is_string()) return of_type(t.get<std::string>(), s, path);
    if (!t.is_array() || t.empty()) throw Error("json_schema: 'type' at " + path + " must be a string or a non-empty array");
    std::string body;
    for (const json& one : t) {
      if (!one.is_string()) throw Error("json_schema: 'type' at " + path + " must list strings");
      body += (body.empty() ? "" : " | ") + of_type(one.get<std::string>(), s, path);
    }
    return define(body);
  }

  // No "type": what the other keywords say it is, else any value.
  std::string untyped(const json& s, const std::string& path) {
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) return object(s, path);
    if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return array(s, path);
    if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern")) return string(s, path);
    return "json-value-0";
  }

  std::string of_type(const std::string& t, const json& s, const std::string& path) {
    if (t == "string") return string(s, path);
    if (t == "number") return "json-number";
    if (t == "integer") return "json-integer";
    if (t == "boolean") return "(\"true\" | \"false\")";
    if (t == "null") return "\"null\"";
    if (t == "object") return object(s, path);
    if (t == "array") return array(s, path);
    throw Error("json_schema: unknown type '" + t + "' at " + path);
  }

  // A count keyword: absent -1; else 0..kMaxRepetition.
  int count(const json& s, const char* key, const std::string& path) const {
    if (!s.contains(key)) return -1;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      throw Error(std::string("json_schema: '") + key + "' at " + path + " must be a non-negative integer");
    if (v.get<int64_t>() > kMaxRepetition)
      unsupported(path + "/" + key, std::string(key) + " above " + std::to_string(kMaxRepetition));
    return int(v.get<int64_t>());
  }

  // "{min,max}" for `count` items of which the first is written apart.
  static std::string repeat(int min, int max) {
    std::string out = "{";
    out += std::to_string(min);
    out += ',';
    if (max >= 0) out += std::to_string(max);
    return out + "}";
  }

  std::string string(const json& s, const std::string& path) {
    const int min = count(s, "minLength", path), max = count(s, "maxLength", path);
    if (min >= 0 && max >= 0 && min > max) unsatisfiable(path, "minLength > maxLength");
    const bool lengths = min >= 0 || max >= 0;
    if (s.contains("pattern")) {
      if (lengths && strict_) unsupported(path, "pattern together with minLength / maxLength");
      if (!s["pattern"].is_string()) throw Error("json_schema: 'pattern' at " + path + " must be a string");
      try {
        return define(kQuote + " (" + regex_to_gbnf(s["pattern"].get<std::string>()) + ") " + kQuote);
      } catch (const Unsatisfiable&) {
        throw;
      } catch (const Error& e) {
        throw Error("json_schema: " + std::string(e.what()) + " at " + path + "/pattern");
      }
    }
    if (s.contains("format") && s["format"].is_string()) {
      const std::string f = s["format"].get<std::string>();
      if (f == "date-time") return define(kQuote + " " + formats().at("date") + " [Tt ] " + formats().at("time") + " " + kQuote);
      if (auto it = formats().find(f); it != formats().end() && !lengths) return define(kQuote + " " + it->second + " " + kQuote);
    }
    if (!lengths) return "json-string";
    return define(kQuote + " json-char" + repeat(std::max(min, 0), max) + " " + kQuote);
  }

  std::string array(const json& s, const std::string& path) {
    const int min = std::max(count(s, "minItems", path), 0), max = count(s, "maxItems", path);
    if (max >= 0 && min > max) unsatisfiable(path, "minItems > maxItems");
    std::string item;
    try {
      item = s.contains("items") ? value(s["items"], path + "/items") : "json-value-0";
    } catch (const Unsatisfiable&) {
      if (min > 0) throw;
      item.clear();  // no item is possible: only the empty array
    }
    if (item.empty() || max == 0) return define("\"[\"" + kSp + "\"]\"");
    const std::string more = "(\",\"" + kSp + item + kSp + ")" + repeat(std::max(min - 1, 0), max < 0 ? -1 : max - 1);
    const std::string items = item + kSp + more;
    return define("\"[\"" + kSp + (min == 0 ? "(" + items + ")?" : items) + " \"]\"");
  }

  struct Member {
    std::string key_value;  // "key" : value, then room for a space
    bool required;
  };

  std::vector<Member> members(const json& s, const std::string& path, const std::string& extra) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) throw Error("json_schema: 'properties' at " + path + " must be an object");
    std::set<std::string> required;
    for (const json& r : s.value("required", json::array()))
      if (r.is_string()) required.insert(r.get<std::string>());
    std::vector<Member> out;
    auto add = [&](const std::string& key, const std::string& rule) {
      out.push_back({gbnf_literal(json(key).dump()) + kSp + "\":\"" + kSp + rule + kSp, required.count(key) > 0});
    };
    for (const auto& [key, sub] : props.items()) {
      try {
        add(key, value(sub, path + "/properties/" + key));
      } catch (const Unsatisfiable&) {
        if (required.count(key)) throw;  // an optional property nothing satisfies is left out
      }
    }
    for (const std::string& key : required) {
      if (props.contains(key)) continue;
      if (extra.empty()) unsatisfiable(path, "required property '" + key + "' is forbidden by additionalProperties");
      add(key, extra);
    }
    return out;
  }

  // The members from i on, in order, optional ones any subset; `first`: no
  // member written yet (else each one starts with a comma).
  std::string object(const json& s, const std::string& path) {
    std::string extra;
    if (s.contains("additionalProperties") && !(s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>()))
      extra = value(s["additionalProperties"], path + "/additionalProperties");
    const std::vector<Member> ms = members(s, path, extra);
    // rest: after at least one member; first: before any.
    std::string rest = extra.empty() ? "\"\"" : define("(\",\"" + kSp + "json-string" + kSp + "\":\"" + kSp + extra + kSp + ")*");
    std::string first = extra.empty() ? "\"\"" : define("(json-string" + kSp + "\":\"" + kSp + extra + kSp + rest + ")?");
    for (size_t i = ms.size(); i-- > 0;) {
      const std::string with = ms[i].key_value + rest;
      const std::string rest_with = "\",\"" + kSp + with;
      first = define(ms[i].required ? with : with + " | " + first);
      rest = define(ms[i].required ? rest_with : rest_with + " | " + rest);
    }
    return define("\"{\"" + kSp + first + " \"}\"");
  }

  const json& root_;
  bool strict_;
  std::string rules_;
  std::string name_;  // the schema's rule; its helpers' names start with it
  std::map<std::string, std::string> refs_;
  int next_ = 0;
  int depth_ = 0;  // value() calls under way
};

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : bytes) {
    const uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void json_schema_rules(const json& schema, bool strict, const std::string& name, std::string& rules) {
  rules += SchemaCompiler(schema, strict, name).run();
}

std::string schema_shared_rules() { return std::string(kSpaceRule) + json_rules(); }

std::string json_schema_to_gbnf(const json& schema, bool strict) {
  std::string rules;
  json_schema_rules(schema, strict, "root", rules);
  return rules + schema_shared_rules();
}

}  // namespace kvlab::grammar

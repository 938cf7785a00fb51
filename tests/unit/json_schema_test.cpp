// The JSON Schema compiler (grammar/json_schema.h): texts the grammar
// takes and refuses for each keyword, strings generated at random from the
// grammar checked against the schema's rules, and the schemas refused as
// unsupported or unsatisfiable.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace kvlab::grammar {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> compile(const json& schema, bool strict = true) {
  return std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(schema, strict)));
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

std::string error_of(const json& schema, bool strict = true) {
  try {
    parse_gbnf(json_schema_to_gbnf(schema, strict));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A random string of the grammar: printable ASCII bytes the matcher takes,
// drawn uniformly, past 60 bytes preferring ones that close a string or a
// container so the walk ends.
std::string generate(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
  Matcher m(g);
  std::string out;
  while (!m.complete() && out.size() < 4000) {
    std::string ok, closing;
    for (int b = 0x20; b < 0x7f; ++b) {
      Matcher t = m;
      if (!t.accept(std::string(1, char(b)))) continue;
      ok += char(b);
      if (b == '"' || b == '}' || b == ']') closing += char(b);
    }
    if (m.can_end() && (ok.empty() || rng() % 4 == 0)) break;
    const std::string& from = out.size() > 60 && !closing.empty() ? closing : ok;
    EXPECT_FALSE(from.empty()) << out;  // every state can go on or end
    if (from.empty()) break;
    const char c = from[rng() % from.size()];
    m.accept(std::string(1, c));
    out += c;
  }
  return out;
}

const json kPerson = json::parse(R"({
  "$defs": {"Address": {"type": "object", "title": "Address",
                        "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 12},
                                       "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                        "required": ["city", "zip"]}},
  "title": "Person", "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 20, "description": "full name"},
    "age": {"type": "integer"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "address": {"$ref": "#/$defs/Address"},
    "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
    "score": {"type": "number"}
  },
  "required": ["name", "age", "color", "tags", "address"]
})");

TEST(JsonSchema, GeneratedStringsValidate) {
  const auto g = compile(kPerson);
  std::mt19937 rng(5);
  const std::vector<std::string> order = {"name", "age", "color", "tags", "address", "nickname", "score"};
  for (int i = 0; i < 200; ++i) {
    const std::string text = generate(g, rng);
    SCOPED_TRACE(text);
    const json j = json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object());
    for (const char* key : {"name", "age", "color", "tags", "address"}) ASSERT_TRUE(j.contains(key));
    size_t at = 0;
    for (const auto& [key, v] : j.items()) {  // declared keys only, in declared order
      const size_t index = size_t(std::find(order.begin(), order.end(), key) - order.begin());
      ASSERT_LT(index, order.size()) << key;
      EXPECT_GE(index, at);
      at = index;
    }
    EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 20 * 6);
    // An integer, maybe past int64 (nlohmann then reads a double).
    EXPECT_TRUE(j["age"].is_number() && std::trunc(j["age"].get<double>()) == j["age"].get<double>());
    EXPECT_TRUE(j["color"] == "red" || j["color"] == "green" || j["color"] == "blue");
    EXPECT_TRUE(j["tags"].is_array() && j["tags"].size() <= 3);
    EXPECT_TRUE(j["address"]["zip"].is_string() && j["address"]["zip"].get<std::string>().size() == 5);
    EXPECT_EQ(j["address"].size(), 2u);
    if (j.contains("nickname")) EXPECT_TRUE(j["nickname"].is_string() || j["nickname"].is_null());
    if (j.contains("score")) EXPECT_TRUE(j["score"].is_number());
  }
}

TEST(JsonSchema, KeywordsByHand) {
  const auto person = compile(kPerson);
  EXPECT_TRUE(matches(person, R"({"name": "Ann", "age": 31, "color": "red", "tags": [], "address": {"city": "Oslo", "zip": "01234"}})"));
  EXPECT_TRUE(matches(person, "{\n  \"name\":\"A\",\"age\":-2,\"color\":\"blue\",\"tags\":[\"x\"],\"address\":{\"city\":\"O\",\"zip\":\"12345\"},\"score\":1.5e3}"));
  EXPECT_FALSE(matches(person, R"({"age": 31, "name": "Ann", "color": "red", "tags": [], "address": {"city": "O", "zip": "01234"}})"));
  EXPECT_FALSE(matches(person, R"({"name": "Ann", "age": 31.5, "color": "red", "tags": [], "address": {"city": "O", "zip": "01234"}})"));
  EXPECT_FALSE(matches(person, R"({"name": "Ann", "age": 3, "color": "pink", "tags": [], "address": {"city": "O", "zip": "01234"}})"));
  EXPECT_FALSE(matches(person, R"({"name": "Ann", "age": 3, "color": "red", "tags": [], "address": {"city": "O", "zip": "0123"}})"));
  EXPECT_FALSE(matches(person, R"({"name":  "Ann", "age": 3, "color": "red", "tags": [], "address": {"city": "O", "zip": "01234"}})"));  // two spaces

  const auto arr = compile(json::parse(R"({"type": "array", "items": {"const": 1}, "minItems": 2, "maxItems": 3})"));
  EXPECT_FALSE(matches(arr, "[1]"));
  EXPECT_TRUE(matches(arr, "[1, 1]"));
  EXPECT_TRUE(matches(arr, "[1,1,1]"));
  EXPECT_FALSE(matches(arr, "[1,1,1,1]"));
  const auto extra = compile(json::parse(R"({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": {"type": "null"}})"));
  EXPECT_TRUE(matches(extra, R"({"a": true, "b": null, "c": null})"));
  EXPECT_TRUE(matches(extra, R"({"b": null})"));
  EXPECT_FALSE(matches(extra, R"({"b": 1})"));
  const auto closed = compile(json::parse(R"({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": false})"));
  EXPECT_TRUE(matches(closed, "{}"));
  EXPECT_FALSE(matches(closed, R"({"b": true})"));
  const auto formats = compile(json::parse(R"({"type": "array", "items": {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "uuid"}]}})"));
  EXPECT_TRUE(matches(formats, R"(["2024-02-29", "123e4567-e89b-12d3-a456-426614174000"])"));
  EXPECT_FALSE(matches(formats, R"(["2024-13-01"])"));
  const auto recursive = compile(json::parse(R"({"type": "object", "properties": {"child": {"$ref": "#"}}})"));
  EXPECT_TRUE(matches(recursive, R"({"child": {"child": {}}})"));
  const auto pattern = compile(json::parse(R"({"type": "string", "pattern": "^(ab|c\\.d)+[^x]?$"})"));
  EXPECT_TRUE(matches(pattern, R"("abc.dab")"));
  EXPECT_TRUE(matches(pattern, R"("abz")"));
  EXPECT_FALSE(matches(pattern, R"("abx")"));
  EXPECT_FALSE(matches(pattern, R"("ab\"")"));  // the class never yields a quote
  const auto unanchored = compile(json::parse(R"({"type": "string", "pattern": "[0-9]"})"));
  EXPECT_TRUE(matches(unanchored, R"("ab7cd")"));
  EXPECT_FALSE(matches(unanchored, R"("abcd")"));
  const auto quote = compile(json::parse(R"({"const": "say \"hi\"\n"})"));
  EXPECT_TRUE(matches(quote, R"("say \"hi\"\n")"));
}

TEST(JsonSchema, UnsatisfiableSchemasAreErrors) {
  for (const char* s : {R"({"type": "string", "minLength": 5, "maxLength": 2})", R"({"enum": []})", R"({"not": {}})",
                        "false", R"({"type": "array", "minItems": 3, "maxItems": 1})",
                        R"({"type": "object", "required": ["x"], "additionalProperties": false})",
                        R"({"anyOf": [false, {"not": {}}]})",
                        R"({"type": "object", "properties": {"a": false}, "required": ["a"]})"}) {
    EXPECT_NE(error_of(json::parse(s)).find("no value satisfies"), std::string::npos) << s << ": " << error_of(json::parse(s));
  }
  // An optional property or a branch that nothing satisfies is dropped.
  const auto g = compile(json::parse(R"({"type": "object", "properties": {"a": false, "b": {"anyOf": [false, {"type": "null"}]}}})"));
  EXPECT_TRUE(matches(g, R"({"b": null})"));
  EXPECT_FALSE(matches(g, R"({"a": null})"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamedInStrictModeOnly) {
  const json s = json::parse(R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})");
  EXPECT_EQ(error_of(s), "json_schema: keyword 'minimum' at #/properties/age is not supported");
  EXPECT_EQ(error_of(s, false), "");
  EXPECT_NE(error_of(json::parse(R"({"$ref": "http://x/y"})")).find("$ref 'http://x/y'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "pattern": "(a)\\1"})")).find("back-references"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "maxLength": 100000})")).find("maxLength above"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"$ref": "#/$defs/Missing"})")).find("points at nothing"), std::string::npos);
}

}  // namespace
}  // namespace kvlab::grammar

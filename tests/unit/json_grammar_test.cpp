// JSON mode's grammar (grammar/json_grammar.h) run by the matcher: hand
// cases, then a differential check against nlohmann::json on random
// documents and their mutations. The grammar must take exactly the texts
// that a strict parser reads as one JSON object (within its whitespace and
// depth limits), and refuse a byte as soon as no such text can start with
// the bytes so far.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "grammar/json_grammar.h"
#include "grammar/matcher.h"

namespace kvlab::grammar {
namespace {

// Feeds `text`; the number of bytes taken (text.size() when all were).
size_t taken(std::string_view text, Matcher& p) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!p.accept(text.substr(i, 1))) return i;
  return text.size();
}

Matcher json_object() { return Matcher(json_object_grammar()); }

bool whole_object(std::string_view text) {
  Matcher p = json_object();
  return taken(text, p) == text.size() && p.complete();
}

TEST(JsonGrammar, TakesObjectsByteByByteAndClosesOnce) {
  for (const char* ok : {"{}", " \n{ }", R"({"a":1})", R"({"a": [1, -2.5e+3, 0, 0.25, 1E9], "b": {"c": null}})",
                         R"({"t": true, "f": false, "s": "x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00"})",
                         "{\"utf8\": \"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", R"({"":""})", R"({"a":[[],[{}]]})"}) {
    Matcher p = json_object();
    const std::string_view t(ok);
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_FALSE(p.complete()) << ok << " at " << i;
      ASSERT_TRUE(p.accept(t.substr(i, 1))) << ok << " at byte " << i;
    }
    EXPECT_TRUE(p.complete()) << ok;
    EXPECT_FALSE(p.accept(" ")) << "nothing follows the object";
    EXPECT_FALSE(p.accept("{"));
  }
}

TEST(JsonGrammar, RefusesTheFirstByteThatLeavesTheGrammar) {
  struct Case {
    const char* text;
    size_t taken;  // bytes taken before the refused one
  };
  for (const Case& c : std::initializer_list<Case>{
           {"[1]", 0},                // the top level is an object
           {"\"s\"", 0},
           {"{a:1}", 1},              // keys are strings
           {R"({"a" 1})", 5},
           {R"({"a":1,})", 7},        // no trailing comma
           {R"({"a":[1,]})", 8},
           {R"({"a":01})", 6},        // no leading zeros
           {R"({"a":-})", 6},
           {R"({"a":1.})", 7},
           {R"({"a":1e})", 7},
           {R"({"a":+1})", 5},
           {R"({"a":.5})", 5},
           {R"({"a":tru})", 8},
           {R"({"a":nul1})", 8},
           {R"({"a":]})", 5},
           {R"({"a":[}})", 6},        // brackets must match
           {R"({"a":"\x"})", 7},      // unknown escape
           {R"({"a":"\u12g4"})", 10},
           {R"({"a":"\udc00"})", 9},  // a low surrogate alone: no D800..DFFF escape starts with DC
           {R"({"a":"\ud800x"})", 12}, // a high one not followed by a low one
           {R"({"a":"\ud800\u0041"})", 14},  // ... whose escape must start with D
           {"{\"a\":\"\x01\"}", 6},     // raw control character
           {"{\"a\":\"\xc0\xaf\"}", 6},  // overlong
           {"{\"a\":\"\xed\xa0\x80\"}", 7},  // UTF-8-encoded surrogate
           {"{\"a\":\"\xf4\x90\x80\x80\"}", 7},  // past U+10FFFF
           {"{\"a\":\"\xe2\x82\"}", 8},  // a sequence cut short
       }) {
    Matcher p = json_object();
    EXPECT_EQ(taken(c.text, p), c.taken) << c.text;
  }
}

TEST(JsonGrammar, LimitsWhitespaceRunsAndDepth) {
  Matcher p = json_object();
  EXPECT_EQ(taken("{" + std::string(kMaxWhitespace, ' ') + " ", p), 1 + size_t(kMaxWhitespace));
  Matcher q = json_object();
  const std::string deep = "{\"a\":" + std::string(kMaxDepth - 1, '[') + "[";
  EXPECT_EQ(taken(deep, q), deep.size() - 1);  // the 33rd container
  EXPECT_TRUE(whole_object("{\"a\":" + std::string(kMaxDepth - 1, '[') + std::string(kMaxDepth - 1, ']') + "}"));
}

// Random documents: objects and arrays up to depth 4, strings with escapes,
// surrogate pairs and multi-byte UTF-8, numbers of every shape.
class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  std::string object(int depth) {
    std::string s = "{";
    const int n = pick(4);
    for (int i = 0; i < n; ++i) {  // one statement per part: the draws in a fixed order
      if (i) s += ',';
      s += ws();
      s += string();
      s += ws();
      s += ':';
      s += ws();
      s += value(depth + 1);
      s += ws();
    }
    s += '}';
    return s;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string ws() {
    static const char* kWs[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};
    return kWs[pick(7)];
  }
  std::string value(int depth) {
    switch (pick(depth < 4 ? 7 : 5)) {
      case 0: return string();
      case 1: return number();
      case 2: {
        static const char* kLiterals[] = {"true", "false", "null"};
        return kLiterals[pick(3)];
      }
      case 3:
      case 4: return number();
      case 5: return object(depth);
      default: {
        std::string s = "[";
        const int n = pick(4);
        for (int i = 0; i < n; ++i) {
          if (i) s += ',';
          s += ws();
          s += value(depth + 1);
        }
        s += ']';
        return s;
      }
    }
  }
  std::string string() {
    static const char* kParts[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\u00e9", "\\uD83D\\uDE00",
                                   "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "~", "'"};
    std::string s = "\"";
    const int n = pick(6);
    for (int i = 0; i < n; ++i) s += kParts[pick(15)];
    return s + "\"";
  }
  // Exponents below 10 even after a mutation adds a digit: the parser
  // refuses numbers past the range of a double, which the grammar allows.
  std::string number() {
    std::string s;
    if (pick(3) == 0) s += '-';
    if (pick(3) == 0) {
      s += '0';
    } else {
      s += char('1' + pick(9));
      if (pick(2)) s += std::to_string(pick(1000));
    }
    if (pick(2)) {
      s += '.';
      s += std::to_string(pick(100));
    }
    if (pick(3) == 0) {
      s += pick(2) ? 'e' : 'E';
      if (pick(2)) s += pick(2) ? '-' : '+';
      s += char('0' + pick(10));
    }
    return s;
  }
  std::mt19937 rng_;
};

// What a strict parser says, within the grammar's own limits (no
// whitespace before or after the object beyond them, depth, runs).
bool parser_takes(const std::string& text) {
  if (text.empty() || text.back() != '}') return false;  // the grammar ends at the closing brace
  if (!nlohmann::json::accept(text)) return false;
  return nlohmann::json::parse(text).is_object();
}

TEST(JsonGrammar, AgreesWithAStrictParserOnRandomDocumentsAndMutations) {
  Gen gen(1234);
  std::mt19937 rng(99);
  const std::string alphabet = "{}[]\":,.-+eE0123456789 \n\\utrfalsn\x01\x7f\xc3\xa9\xed\xa0\xf0\x9f";
  int agreed_bad = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string doc = gen.object(0);
    ASSERT_TRUE(parser_takes(doc)) << doc;
    ASSERT_TRUE(whole_object(doc)) << doc;
    // One mutation: a byte replaced, inserted or removed.
    std::string m = doc;
    const size_t at = std::uniform_int_distribution<size_t>(0, m.size() - 1)(rng);
    const char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    switch (i % 3) {
      case 0: m[at] = c; break;
      case 1: m.insert(m.begin() + ptrdiff_t(at), c); break;
      default: m.erase(at, 1); break;
    }
    EXPECT_EQ(whole_object(m), parser_takes(m)) << m;
    agreed_bad += !parser_takes(m);
  }
  EXPECT_GT(agreed_bad, 1000);  // the mutations did break documents
}

}  // namespace
}  // namespace kvlab::grammar

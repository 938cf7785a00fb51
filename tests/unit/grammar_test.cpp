// The GBNF parser and the matcher (grammar/gbnf.h, grammar/matcher.h):
// which texts a grammar takes, byte by byte, and the errors for grammars
// that are malformed, left-recursive or match nothing.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace kvlab::grammar {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& gbnf) { return std::make_shared<const Grammar>(parse_gbnf(gbnf)); }

// The bytes of `text` the grammar takes, one at a time, before refusing one.
size_t taken(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.accept(text.substr(i, 1))) return i;
  return text.size();
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, AlternativesGroupsAndRepetition) {
  const auto g = compile(R"(
# a comment line
root ::= greeting ("," " "? greeting)* "!"?   # trailing comment
greeting ::= "hi" | "hello" | [0-9]{2,3}
)");
  for (const char* ok : {"hi", "hello!", "hi,hello", "hi, 12, 345!", "07"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "h", "hi,", "1", "1234", "hi!!", "hi  ,hi", "HI"}) EXPECT_FALSE(matches(g, bad)) << bad;
  EXPECT_EQ(taken(g, "hi,hellx"), 7u);
  EXPECT_EQ(taken(g, "1234"), 3u);
}

TEST(Gbnf, CountedRepetitionAndPlus) {
  const auto g = compile("root ::= \"a\"{3} \"b\"{1,} \"c\"{,2} \"d\"+\n");
  EXPECT_TRUE(matches(g, "aaabd"));
  EXPECT_TRUE(matches(g, "aaabbbccdd"));
  EXPECT_FALSE(matches(g, "aabd"));
  EXPECT_FALSE(matches(g, "aaabcccd"));
  EXPECT_FALSE(matches(g, "aaab"));
  const auto empty = compile("root ::= \"x\" \"\"{2,5} \"\"* \"y\"\n");  // nothing repeated is nothing
  EXPECT_TRUE(matches(empty, "xy"));
  const auto multi = compile("root ::= \"ab\"{2}\n");  // a literal repeated as a whole
  EXPECT_TRUE(matches(multi, "abab"));
  EXPECT_FALSE(matches(multi, "abb"));
}

TEST(Gbnf, RulesGoOnAcrossLinesInGroupsAndAfterBars) {
  const auto g = compile("root ::= (\n  \"x\"\n  \"y\"\n) tail\ntail ::= \"1\"\n  | \"2\"\n");
  EXPECT_TRUE(matches(g, "xy1"));
  EXPECT_TRUE(matches(g, "xy2"));
  EXPECT_FALSE(matches(g, "x1"));
}

TEST(Gbnf, EscapesAndCharacterClasses) {
  const auto g = compile(R"(root ::= "\x41\u00e9\n\"\\" [^a-z\]] [\u0100-\U0001F600] .)");
  EXPECT_TRUE(matches(g, "A\xc3\xa9\n\"\\Z\xc4\x80z"));
  EXPECT_TRUE(matches(g, "A\xc3\xa9\n\"\\!\xf0\x9f\x98\x80\xe2\x82\xac"));
  EXPECT_FALSE(matches(g, "A\xc3\xa9\n\"\\a\xc4\x80z"));  // a is in a-z
  EXPECT_FALSE(matches(g, "A\xc3\xa9\n\"\\]\xc4\x80z"));  // \] is in the class
  EXPECT_FALSE(matches(g, "A\xc3\xa9\n\"\\Zzz"));          // z is below U+0100
}

TEST(Matcher, DecodesUtf8StrictlyAndRefusesEarly) {
  const auto any = compile("root ::= .*\n");
  EXPECT_TRUE(matches(any, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  EXPECT_EQ(taken(any, "a\xc0\xaf"), 1u);       // overlong lead byte
  EXPECT_EQ(taken(any, "a\xe0\x80"), 2u);       // overlong three-byte form
  EXPECT_EQ(taken(any, "\xed\xa0\x80"), 1u);    // a surrogate
  EXPECT_EQ(taken(any, "\xf4\x90\x80\x80"), 1u);  // past U+10FFFF
  EXPECT_EQ(taken(any, "\x80"), 0u);            // a continuation byte first
  Matcher half(any);
  ASSERT_TRUE(half.accept("\xe2\x82"));
  EXPECT_FALSE(half.can_end());                 // in the middle of a character
  // A class of two-byte characters refuses a three-byte lead at once, and
  // a lead byte whose characters all lie outside the class.
  const auto latin = compile("root ::= [\\u00c0-\\u00ff]+\n");
  EXPECT_EQ(taken(latin, "\xe2"), 0u);
  EXPECT_EQ(taken(latin, "\xc2"), 0u);          // U+0080..U+00BF
  EXPECT_EQ(taken(latin, "\xc3\xa9\xc3"), 3u);
}

TEST(Matcher, CompleteWhenNothingMayFollow) {
  const auto g = compile("root ::= \"a\" \"b\"?\n");
  Matcher m(g);
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.accept("c"));
  EXPECT_TRUE(m.can_end());  // a refused byte leaves the state as it was
  ASSERT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.accept("b"));
}

TEST(Matcher, NestingGrowsTheStackAndTailLoopsDoNot) {
  const auto parens = compile("root ::= \"(\" root \")\" | \"x\"\n");
  std::string deep = std::string(200, '(') + "x" + std::string(200, ')');
  EXPECT_TRUE(matches(parens, deep));
  EXPECT_FALSE(matches(parens, deep + ")"));
  const auto loop = compile("root ::= [a-z]* \"!\"\n");
  Matcher m(loop);
  ASSERT_TRUE(m.accept(std::string(10000, 'q')));
  EXPECT_LT(m.arena().size(), 8u);  // the loop's frames are reused, not stacked
  EXPECT_TRUE(m.accept("!"));
  EXPECT_TRUE(m.complete());
}

TEST(Matcher, AmbiguousGrammarsKeepOneStackPerDistinctParse) {
  const auto g = compile("root ::= \"a\"* \"a\"* \"a\"* \"b\"\n");
  Matcher m(g);
  ASSERT_TRUE(m.accept(std::string(300, 'a')));
  EXPECT_EQ(m.stacks().size(), 4u);  // in the first, second or third run, or at the "b"
  EXPECT_TRUE(m.accept("b"));
}

TEST(Gbnf, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"a\"\nroot2 ::= \"b\" |\n  \"c\" ]\n"), "grammar line 3, column 7: unexpected ']'");
  EXPECT_EQ(error_of("root ::= \"abc\n"), "grammar line 1, column 14: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-\n"), "grammar line 1, column 13: unterminated character class");
  EXPECT_EQ(error_of("root ::= foo\n"), "grammar line 1, column 10: unknown rule 'foo'");
  EXPECT_EQ(error_of("root = \"a\"\n"), "grammar line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}\n"), "grammar line 1, column 18: repetition {m,n} needs m <= n");
  EXPECT_EQ(error_of("root ::= \"a\"{5000}\n"), "grammar line 1, column 17: repetition count above 1000");
  EXPECT_EQ(error_of("root ::= \"\\q\"\n"), "grammar line 1, column 12: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= [z-a]\n"), "grammar line 1, column 14: character range is reversed");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\"\n"), "grammar line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("start ::= \"a\"\n"), "grammar: no rule named 'root'");
  EXPECT_EQ(error_of(""), "grammar: no rule named 'root'");
}

TEST(Gbnf, SizeAndNestingAreBounded) {
  EXPECT_NE(error_of("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')') + "\n").find("nested more than 128"),
            std::string::npos);
  std::string many = "root ::= ";
  for (int i = 0; i < 3000; ++i) many += "[a-z]{1000} ";
  EXPECT_NE(error_of(many + "\n").find("more than 2000000 symbols"), std::string::npos);
  std::string rules = "root ::= r0\n";
  for (int i = 0; i < 21000; ++i) rules += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  EXPECT_NE(error_of(rules).find("more than 20000 rules"), std::string::npos);
}

TEST(Gbnf, LeftRecursionAndEmptyLanguagesAreErrors) {
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"\n").find("'root' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= y? root \"a\"\ny ::= \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"\")*\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" root\n").find("'root' matches no string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [^\\x00-\\U0010FFFF]\n").find("matches no string"), std::string::npos);
  // A dead alternative is dropped; the rest of the grammar stands.
  const auto g = compile("root ::= \"a\" | \"b\" dead\ndead ::= \"c\" dead\n");
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_EQ(taken(g, "b"), 0u);
}

}  // namespace
}  // namespace kvlab::grammar

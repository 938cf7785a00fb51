// The trie walk's token mask (grammar/token_mask.h) on the default model's
// vocabulary against the plain definition, token by token: a token is
// allowed when the matcher takes all of its bytes. The per-token check is
// this test's oracle only; the mask never runs it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/models.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "grammar/token_mask.h"

namespace kvlab::grammar {
namespace {

std::vector<std::string> pieces(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> out;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) out.push_back(tok.piece(id));
  return out;
}

// Compares the mask with the per-token check after each prefix; returns
// the number of tokens allowed after each.
std::vector<int> check_prefixes(const TokenMask& mask, const std::shared_ptr<const Grammar>& g,
                                const std::vector<std::string>& prefixes) {
  std::vector<int> counts;
  for (const std::string& prefix : prefixes) {
    SCOPED_TRACE(prefix);
    Matcher m(g);
    EXPECT_TRUE(m.accept(prefix));
    std::vector<uint8_t> allowed;
    const int n = mask.allowed(m, allowed);
    int expected = 0, mismatches = 0;
    for (size_t id = 0; id < mask.vocab_size(); ++id) {
      const std::string_view b = mask.bytes(int32_t(id));
      Matcher one = m;
      const bool takes = !b.empty() && one.accept(b);
      expected += takes;
      if (takes != bool(allowed[id]) && ++mismatches <= 5)
        ADD_FAILURE() << "token " << id << " '" << b << "': mask " << int(allowed[id]) << ", matcher " << takes;
    }
    EXPECT_EQ(n, expected);
    counts.push_back(n);
  }
  return counts;
}

class GrammarMask : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
    mask_ = std::make_unique<TokenMask>(pieces(*lm.tok));
  }
  static std::unique_ptr<TokenMask> mask_;
};
std::unique_ptr<TokenMask> GrammarMask::mask_;

TEST_F(GrammarMask, JsonObjectAgreesWithThePerTokenCheck) {
  const auto counts = check_prefixes(*mask_, json_object_grammar(),
                                     {"", " ", "{", "{\"na", "{\"name\"", "{\"name\": ", "{\"a\": 1", "{\"a\": 1.5e",
                                      "{\"a\": [tr", "{\"a\": \"x\\", "{\"a\": \"\\ud83d", "{\"a\": \"\xe2\x82",
                                      "{\"a\": {\"b\": [1, {}]}"});
  EXPECT_GT(counts[3], int(mask_->vocab_size()) / 2);  // inside a string nearly every token fits
  EXPECT_LT(counts[0], int(mask_->vocab_size()) / 100);  // whitespace runs, "{" and what follows it
}

TEST_F(GrammarMask, Utf8ClassesAndWildcardsAgreeWithThePerTokenCheck) {
  const auto cyrillic = std::make_shared<const Grammar>(parse_gbnf("root ::= [а-яё ]+ \"!\" [0-9]{1,4}\n"));
  check_prefixes(*mask_, cyrillic, {"", "\xd0\xbf", "\xd0", "\xd0\xbf\xd1\x80\xd0\xb8 ", "\xd0\xbf!", "\xd0\xbf!12"});
  const auto any = std::make_shared<const Grammar>(parse_gbnf("root ::= \"<\" [^>]* \">\" .? .?\n"));
  check_prefixes(*mask_, any, {"", "<", "<ab", "<a>", "<a>\xe2"});
}

}  // namespace
}  // namespace kvlab::grammar

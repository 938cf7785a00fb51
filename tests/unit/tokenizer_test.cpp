// Tokenizer unit tests on small hand-built vocabularies: every expected id
// below follows from the algorithm by hand (see src/tokenizer/*.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace kvlab::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

std::string gpt2_char(uint8_t b) {
  std::string s;
  unicode::append_utf8(s, unicode::byte_to_cp(b));
  return s;
}

int32_t id_of(const Tokenizer& t, const std::string& text) {
  const auto& toks = t.vocab().tokens;
  auto it = std::find(toks.begin(), toks.end(), text);
  EXPECT_NE(it, toks.end()) << "no token " << text;
  return int32_t(it - toks.begin());
}

// Byte-level BPE vocabulary: the 256 byte symbols (ids 0..255 in byte order),
// then `extra` normal tokens, then `specials` with their types.
Vocab bpe_vocab(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                const std::vector<std::pair<std::string, TokenType>>& specials = {}, const std::string& pre = "gpt2") {
  Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(gpt2_char(uint8_t(b)));
  for (const auto& e : extra) v.tokens.push_back(e);
  v.types.assign(v.tokens.size(), int32_t(TokenType::Normal));
  for (const auto& [text, type] : specials) {
    v.tokens.push_back(text);
    v.types.push_back(int32_t(type));
  }
  v.merges = merges;
  return v;
}

// SentencePiece vocabulary: <unk> <s> </s>, byte tokens <0x00>..<0xFF>, then
// pieces with scores.
Vocab spm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {int32_t(TokenType::Unknown), int32_t(TokenType::Control), int32_t(TokenType::Control)};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.tokens.push_back(name);
    v.types.push_back(int32_t(TokenType::Byte));
  }
  for (const auto& [p, s] : pieces) {
    v.tokens.push_back(p);
    v.types.push_back(int32_t(TokenType::Normal));
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) v.scores[259 + i] = pieces[i].second;
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

// ---------------------------------------------------------------- unicode

TEST(TokenizerUnicode, TableClasses) {
  using namespace unicode;
  EXPECT_TRUE(is_letter(flags('A')));
  EXPECT_TRUE(is_letter(flags(0x00E9)));   // é
  EXPECT_TRUE(is_letter(flags(0x4E2D)));   // 中
  EXPECT_TRUE(is_number(flags('7')));
  EXPECT_TRUE(is_number(flags(0x0663)));   // Arabic-Indic three (Nd)
  EXPECT_TRUE(is_number(flags(0x00B2)));   // superscript two (No)
  EXPECT_TRUE(is_space(flags(' ')));
  EXPECT_TRUE(is_space(flags('\n')));
  EXPECT_TRUE(is_space(flags(0x3000)));    // ideographic space
  EXPECT_TRUE(is_space(flags(0x0085)));    // NEL
  EXPECT_FALSE(is_space(flags(0x001C)));   // not White_Space (str.isspace says yes)
  EXPECT_TRUE(is_punct(flags('!')));
  EXPECT_FALSE(is_punct(flags('$')));      // Sc
  EXPECT_EQ(flags(0x0378) & unicode_tables::kClassMask, unicode_tables::kUndefined);
  EXPECT_EQ(flags(0x1F600) & unicode_tables::kClassMask, unicode_tables::kSymbol);  // 😀
  EXPECT_EQ(flags(0x110000), unicode_tables::kUndefined);
}

TEST(TokenizerUnicode, LenientDecodeReplacesEachBadByte) {
  using unicode::decode_lenient;
  EXPECT_EQ(decode_lenient("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_lenient("\xFF"), (std::vector<uint32_t>{0xFFFD}));
  // Truncated 2-byte sequence: one U+FFFD for the lead byte, then 'A'.
  EXPECT_EQ(decode_lenient("\xC3" "A"), (std::vector<uint32_t>{0xFFFD, 'A'}));
  EXPECT_EQ(decode_lenient("\xE2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_lenient("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
}

TEST(TokenizerUnicode, Gpt2ByteMapIsABijection) {
  std::vector<bool> seen(512, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = unicode::byte_to_cp(uint8_t(b));
    ASSERT_LT(cp, 512u);
    EXPECT_FALSE(seen[cp]);
    seen[cp] = true;
    EXPECT_EQ(unicode::cp_to_byte(cp), b);
  }
  EXPECT_EQ(unicode::byte_to_cp(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(unicode::byte_to_cp('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(unicode::byte_to_cp('a'), uint32_t('a'));
}

TEST(TokenizerUnicode, CompletePrefixHoldsOnlyUnfinishedSequences) {
  using unicode::complete_prefix;
  EXPECT_EQ(complete_prefix("abc"), 3u);
  EXPECT_EQ(complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(complete_prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(complete_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(complete_prefix("\xFF"), 1u);         // never valid: released
  EXPECT_EQ(complete_prefix("\x80"), 1u);         // stray continuation
  EXPECT_EQ(complete_prefix("\xC3" "A"), 2u);     // broken sequence
}

// ---------------------------------------------------------------- pre-tokenizer

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  const auto cps = unicode::decode_lenient(text);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t n : make_pretokenizer(pre).split(cps)) {
    std::string w;
    for (size_t i = start; i < start + n; ++i) unicode::append_utf8(w, cps[i]);
    out.push_back(w);
    start += n;
  }
  EXPECT_EQ(start, cps.size());
  return out;
}

using Words = std::vector<std::string>;

TEST(TokenizerPretokenize, Gpt2) {
  EXPECT_EQ(split("gpt2", "Hello world's  x"), (Words{"Hello", " world", "'s", " ", " x"}));
  EXPECT_EQ(split("gpt2", "héllo wörld!!"), (Words{"héllo", " wörld", "!!"}));
  EXPECT_EQ(split("gpt2", "a 123 ?!x\n\nb  "), (Words{"a", " 123", " ?!", "x", "\n", "\n", "b", "  "}));
  EXPECT_EQ(split("gpt2", "I'M 'll"), (Words{"I", "'", "M", " '", "ll"}));  // case-sensitive contractions
  EXPECT_EQ(split("gpt2", ""), (Words{}));
}

TEST(TokenizerPretokenize, SmollmSplitsEveryDigit) {
  EXPECT_EQ(split("smollm", "abc123 x45"), (Words{"abc", "1", "2", "3", " x", "4", "5"}));
  EXPECT_EQ(split("smollm", "hello 42"), (Words{"hello", " ", "4", "2"}));
}

TEST(TokenizerPretokenize, Llama3AndQwen2) {
  EXPECT_EQ(split("llama-bpe", "12345 abc\n\n  def"), (Words{"123", "45", " abc", "\n\n", " ", " def"}));
  EXPECT_EQ(split("llama3", "I'M ok.\n"), (Words{"I", "'M", " ok", ".\n"}));
  EXPECT_EQ(split("qwen2", "x=12345;"), (Words{"x", "=", "1", "2", "3", "4", "5", ";"}));
}

// Words as llama.cpp's form of the GPT-4o pattern gives them (checked with
// Python's regex module on the same pattern): capitals start a word unless
// a capital run is followed by lower case; letters outside ASCII count as
// both cases, so the last one in a capital run ends the word there.
TEST(TokenizerPretokenize, Gpt4oCasedWords) {
  EXPECT_EQ(split("gpt-4o", "getUserName iPhone HTTPServer"),
            (Words{"get", "User", "Name", " i", "Phone", " HTTPServer"}));
  EXPECT_EQ(split("gpt-4o", " ÉCOLE AÑO DÉJÀ"), (Words{" É", "COLE", " AÑ", "O", " DÉJÀ"}));
  EXPECT_EQ(split("llama4", "it's DON'T'S I'm"), (Words{"it's", " DON'T", "'S", " I'm"}));
  EXPECT_EQ(split("gpt-4o", "e\u0301te\u0301 a/b//\n 12345"),
            (Words{"e", "\u0301te", "\u0301", " a", "/b", "//\n", " ", "123", "45"}));
  EXPECT_EQ(split("gpt-4o", "x.y/\n\n  z"), (Words{"x", ".y", "/\n\n", " ", " z"}));
}

// Tekken (Mistral): GPT-4o's cased words without the contraction suffix,
// digits one by one (checked as the GPT-4o cases are).
TEST(TokenizerPretokenize, TekkenCasedWordsWithoutContractions) {
  EXPECT_EQ(split("tekken", "it's 12345 DON'T"), (Words{"it", "'s", " ", "1", "2", "3", "4", "5", " DON", "'T"}));
  EXPECT_EQ(split("tekken", "getUserName x/\n"), (Words{"get", "User", "Name", " x", "/\n"}));
  // llama.cpp's other Tekken settings: whole-token words skip merging, BOS by default.
  EXPECT_TRUE(make_pretokenizer("tekken").ignore_merges);
  EXPECT_TRUE(pre_default_add_bos("tekken"));
}

TEST(TokenizerPretokenize, DefaultPipeline) {
  EXPECT_EQ(split("default", "a+b=3000!"), (Words{"a", "+", "b", "=", "300", "0", "!"}));
}

TEST(TokenizerPretokenize, UnknownNameIsAnError) {
  EXPECT_THROW(make_pretokenizer("no-such-pre"), Error);
}

// ---------------------------------------------------------------- BPE

TEST(TokenizerBpe, LowestRankMergesFirst) {
  // "abc": with "b c" ranked before "a b", b+c merges first and a stays.
  auto t1 = Tokenizer::create(bpe_vocab({"ab", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(t1->encode("abc", false, false), (Ids{'a', id_of(*t1, "bc")}));
  auto t2 = Tokenizer::create(bpe_vocab({"ab", "bc"}, {"a b", "b c"}));
  EXPECT_EQ(t2->encode("abc", false, false), (Ids{id_of(*t2, "ab"), 'c'}));
  // A third merge continues from the merged symbol.
  auto t3 = Tokenizer::create(bpe_vocab({"ab", "bc", "abc"}, {"a b", "b c", "ab c"}));
  EXPECT_EQ(t3->encode("abc", false, false), (Ids{id_of(*t3, "abc")}));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  auto t = Tokenizer::create(bpe_vocab({"aa"}, {"a a"}));
  EXPECT_EQ(t->encode("aaa", false, false), (Ids{id_of(*t, "aa"), 'a'}));
  EXPECT_EQ(t->encode("aaaa", false, false), (Ids{id_of(*t, "aa"), id_of(*t, "aa")}));
}

TEST(TokenizerBpe, SpaceIsByteMappedAndWordsDoNotMergeAcrossSplits) {
  const std::string G = gpt2_char(' ');  // "Ġ"
  auto t = Tokenizer::create(bpe_vocab({G + "b", "a" + G}, {"a " + G, G + " b"}));
  // "a b" -> words "a", " b": the "a Ġ" merge would cross a word boundary.
  EXPECT_EQ(t->encode("a b", false, false), (Ids{'a', id_of(*t, G + "b")}));
}

TEST(TokenizerBpe, MergeSideThatIsNotAToken) {
  // "x y" makes "xy" which is not a token but "xy z" makes "xyz", which is.
  auto t = Tokenizer::create(bpe_vocab({"xyz"}, {"x y", "xy z"}));
  EXPECT_EQ(t->encode("xyz", false, false), (Ids{id_of(*t, "xyz")}));
  // "xy" alone stays an untokenizable symbol: its single-byte tokens are emitted.
  EXPECT_EQ(t->encode("xy", false, false), (Ids{'x', 'y'}));
}

TEST(TokenizerBpe, RoundTripsAnyValidUtf8) {
  const std::string G = gpt2_char(' ');
  auto t = Tokenizer::create(bpe_vocab({G + "h", G + "he"}, {G + " h", G + "h e"}));
  for (const std::string s : {"hello, he said", "naïve café — 東京 😀\n\ttabs", "  lead and trail  ", ""}) {
    EXPECT_EQ(t->decode(t->encode(s, false, false)), s);
  }
}

TEST(TokenizerBpe, InvalidUtf8BecomesReplacementCharacterBytes) {
  auto t = Tokenizer::create(bpe_vocab({}, {}));
  // 0xFF -> U+FFFD -> bytes EF BF BD, each a byte token (like llama.cpp).
  EXPECT_EQ(t->encode("\xFF", false, false), (Ids{0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(t->decode(t->encode("a\xC3" "b", false, false)), "a\xEF\xBF\xBD" "b");
}

TEST(TokenizerBpe, SpecialTokensAreMatchedFirstLongestWins) {
  auto t = Tokenizer::create(bpe_vocab({}, {}, {{"<|im_start|>", TokenType::Control},
                                                {"<|im_end|>", TokenType::Control},
                                                {"<|im", TokenType::Control},
                                                {"<tool>", TokenType::UserDefined}}));
  const int32_t start = id_of(*t, "<|im_start|>"), end = id_of(*t, "<|im_end|>"), tool = id_of(*t, "<tool>");
  EXPECT_EQ(t->encode("<|im_start|>hi<|im_end|>", false, true), (Ids{start, 'h', 'i', end}));
  EXPECT_EQ(t->encode("<|im_start|><|im_start|>", false, true), (Ids{start, start}));
  // Without parse_special control tokens are plain text; user-defined ones still match.
  const Ids plain = t->encode("<|im_end|>", false, false);
  EXPECT_EQ(t->decode(plain), "<|im_end|>");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), end), 0);
  EXPECT_EQ(t->encode("a<tool>b", false, false), (Ids{'a', tool, 'b'}));
}

TEST(TokenizerBpe, AddSpecialUsesVocabFlags) {
  Vocab v = bpe_vocab({}, {}, {{"<s>", TokenType::Control}, {"</s>", TokenType::Control}});
  v.bos = 256, v.eos = 257;
  auto plain = Tokenizer::create(v);
  EXPECT_EQ(plain->encode("a", true, false), (Ids{'a'}));
  v.add_bos = v.add_eos = true;
  auto both = Tokenizer::create(v);
  EXPECT_EQ(both->encode("a", true, false), (Ids{256, 'a', 257}));
  EXPECT_EQ(both->encode("a", false, false), (Ids{'a'}));
  EXPECT_EQ(both->encode("", true, false), (Ids{256, 257}));
}

TEST(TokenizerBpe, PiecesAndRenderSpecial) {
  auto t = Tokenizer::create(bpe_vocab({gpt2_char(' ') + "x"}, {}, {{"<|im_end|>", TokenType::Control},
                                                                     {"<u>", TokenType::UserDefined}}));
  EXPECT_EQ(t->piece(id_of(*t, gpt2_char(' ') + "x")), " x");
  EXPECT_EQ(t->piece(id_of(*t, "<|im_end|>")), "");
  EXPECT_EQ(t->piece(id_of(*t, "<|im_end|>"), true), "<|im_end|>");
  EXPECT_EQ(t->piece(id_of(*t, "<u>")), "<u>");
  EXPECT_THROW(t->piece(-1), Error);
  EXPECT_THROW(t->piece(t->n_vocab()), Error);
}

TEST(TokenizerBpe, LongTextIsFast) {
  // ~48 KB of text through a 256-symbol vocabulary with a chain of merges.
  std::vector<std::string> extra, merges;
  std::string acc = "a";
  for (int i = 0; i < 20; ++i) {
    merges.push_back(acc + " a");
    acc += "a";
    extra.push_back(acc);
  }
  auto t = Tokenizer::create(bpe_vocab(extra, merges));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "aaaaaaa The quick brown fox 123 ";
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = t->encode(text, false, false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(t->decode(ids), text);
  EXPECT_LT(ms, 500.0) << "encode of " << text.size() << " bytes took " << ms << " ms";
}

// ---------------------------------------------------------------- SentencePiece

TEST(TokenizerSpm, HighestScoreMergesFirst) {
  const std::string S = "\xE2\x96\x81";  // ▁
  // "▁ab": pairs "▁a" (-1) and "ab" (-2): "▁a" wins, then "▁ab" is not reachable
  // from "▁a"+"b" unless that token exists.
  auto t = Tokenizer::create(spm_vocab({{S, -5}, {"a", -5}, {"b", -5}, {S + "a", -1}, {"ab", -2}}));
  EXPECT_EQ(t->encode("ab", false, false), (Ids{id_of(*t, S + "a"), id_of(*t, "b")}));
  auto u = Tokenizer::create(spm_vocab({{S, -5}, {"a", -5}, {"b", -5}, {S + "a", -3}, {"ab", -2}}));
  EXPECT_EQ(u->encode("ab", false, false), (Ids{id_of(*u, S), id_of(*u, "ab")}));
  auto w = Tokenizer::create(spm_vocab({{S, -5}, {"a", -5}, {"b", -5}, {S + "a", -1}, {S + "ab", -9}}));
  EXPECT_EQ(w->encode("ab", false, false), (Ids{id_of(*w, S + "ab")}));
}

TEST(TokenizerSpm, BosSpacePrefixAndByteFallback) {
  const std::string S = "\xE2\x96\x81";
  auto t = Tokenizer::create(spm_vocab({{S, -1}, {"h", -2}, {"i", -2}, {S + "h", -1}, {S + "hi", -1}}));
  EXPECT_EQ(t->encode("hi", true, false), (Ids{1, id_of(*t, S + "hi")}));
  // 'é' is not a piece: bytes C3 A9 -> <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_EQ(t->encode("hi é", false, false), (Ids{id_of(*t, S + "hi"), id_of(*t, S), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode(t->encode("hi é", true, false)), " hi é");
}

TEST(TokenizerSpm, SpecialTokenRestartsSpacePrefix) {
  const std::string S = "\xE2\x96\x81";
  auto t = Tokenizer::create(spm_vocab({{S, -1}, {"a", -2}, {S + "a", -1}}));
  // "a</s>a": the text after a special token gets the space prefix again.
  EXPECT_EQ(t->encode("a</s>a", false, true), (Ids{id_of(*t, S + "a"), 2, id_of(*t, S + "a")}));
  Vocab v = spm_vocab({{S, -1}, {"a", -2}, {S + "a", -1}});
  v.add_space_prefix = false;
  auto n = Tokenizer::create(v);
  EXPECT_EQ(n->encode("a", false, false), (Ids{id_of(*n, "a")}));
}

TEST(TokenizerSpm, InvalidUtf8StaysBytes) {
  const std::string S = "\xE2\x96\x81";
  auto t = Tokenizer::create(spm_vocab({{S, -1}, {"A", -1}}));
  // Lead byte C3 takes the next byte with it ("\xC3" "A" is one symbol), which
  // is not a piece: both bytes fall back, like llama.cpp.
  EXPECT_EQ(t->encode("\xC3" "A", false, false), (Ids{id_of(*t, S), 3 + 0xC3, 3 + 'A'}));
  EXPECT_EQ(t->encode("\xFF", false, false), (Ids{id_of(*t, S), 3 + 0xFF}));
}

TEST(TokenizerSpm, RandomBytesRoundTrip) {
  const std::string S = "\xE2\x96\x81";
  auto t = Tokenizer::create(spm_vocab({{S, -1}, {"a", -2}, {"b", -2}, {S + "a", -1}, {"ab", -1.5f}}));
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = char(rng() % 4 == 0 ? 'a' + rng() % 3 : rng() % 256);
    if (s.find(S) != std::string::npos) continue;  // a literal "▁" decodes as ' '
    // A space right after a stray lead byte is swallowed into that byte's
    // symbol, so its "▁" comes back as raw bytes (as in llama.cpp): compare
    // with "▁" read as ' '.
    const std::string raw = t->decode(t->encode(s, false, false), true);
    std::string got;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw.compare(i, S.size(), S) == 0) {
        got += ' ';
        i += S.size() - 1;
      } else {
        got += raw[i];
      }
    }
    EXPECT_EQ(got, s.empty() ? "" : " " + s);
  }
}

// ---------------------------------------------------------------- robustness

TEST(TokenizerBpe, RandomBytesNeverThrowAndDecodeToLenientText) {
  const std::string G = gpt2_char(' ');
  for (const std::string pre : {"gpt2", "smollm", "llama3", "qwen2", "default", "falcon"}) {
    auto t = Tokenizer::create(
        bpe_vocab({G + "a", "ab"}, {G + " a", "a b"}, {{"<|x|>", TokenType::Control}}, pre));
    std::mt19937 rng(11);
    for (int iter = 0; iter < 200; ++iter) {
      std::string s(rng() % 48, '\0');
      for (char& c : s) c = char(rng() % 3 == 0 ? " a1\n'!"[rng() % 6] : rng() % 256);
      std::string expect;
      for (uint32_t cp : unicode::decode_lenient(s)) unicode::append_utf8(expect, cp);
      EXPECT_EQ(t->decode(t->encode(s, true, true)), expect) << pre;
    }
  }
}

// ---------------------------------------------------------------- vocabulary checks

TEST(TokenizerVocab, RejectsInconsistentVocabularies) {
  Vocab empty;
  empty.model = "gpt2";
  EXPECT_THROW(Tokenizer::create(empty), Error);

  Vocab v = bpe_vocab({}, {});
  v.model = "bert";
  EXPECT_THROW(Tokenizer::create(v), Error);

  v = bpe_vocab({"a"}, {});  // "a" duplicates byte token 'a'
  EXPECT_THROW(Tokenizer::create(v), Error);

  v = bpe_vocab({}, {});
  v.eos = 9999;
  EXPECT_THROW(Tokenizer::create(v), Error);

  v = bpe_vocab({}, {});
  v.scores = {1.0f};
  EXPECT_THROW(Tokenizer::create(v), Error);

  v = bpe_vocab({}, {});
  v.add_bos = true;  // but no BOS id
  EXPECT_THROW(Tokenizer::create(v), Error);

  v = bpe_vocab({}, {});
  v.pre = "mystery";
  EXPECT_THROW(Tokenizer::create(v), Error);
}

TEST(TokenizerVocab, EndOfGeneration) {
  Vocab v = bpe_vocab({}, {}, {{"<|endoftext|>", TokenType::Control},
                               {"<|im_start|>", TokenType::Control},
                               {"<|im_end|>", TokenType::Control},
                               {"<|eot_id|>", TokenType::Control},
                               {"<stop>", TokenType::Control}});
  v.eos = 260;  // "<stop>"
  auto t = Tokenizer::create(v);
  EXPECT_TRUE(t->is_end_of_generation(256));
  EXPECT_FALSE(t->is_end_of_generation(257));
  EXPECT_TRUE(t->is_end_of_generation(258));
  EXPECT_TRUE(t->is_end_of_generation(259));
  EXPECT_TRUE(t->is_end_of_generation(260));
  EXPECT_FALSE(t->is_end_of_generation('a'));
  EXPECT_FALSE(t->is_end_of_generation(-1));
  EXPECT_FALSE(t->is_end_of_generation(100000));
}

// ---------------------------------------------------------------- GGUF adapter

// Minimal GGUF v3 writer: metadata only, no tensors.
class GgufImage {
 public:
  GgufImage& str(const std::string& key, const std::string& v) {
    kv(key, 8);
    string(v);
    return *this;
  }
  GgufImage& u32(const std::string& key, uint32_t v) {
    kv(key, 4);
    pod(v);
    return *this;
  }
  GgufImage& i32(const std::string& key, int32_t v) {
    kv(key, 5);
    pod(v);
    return *this;
  }
  GgufImage& boolean(const std::string& key, bool v) {
    kv(key, 7);
    pod(uint8_t(v));
    return *this;
  }
  GgufImage& strs(const std::string& key, const std::vector<std::string>& v) {
    array(key, 8, v.size());
    for (const auto& x : v) string(x);
    return *this;
  }
  GgufImage& f32s(const std::string& key, const std::vector<float>& v) {
    array(key, 6, v.size());
    for (float x : v) pod(x);
    return *this;
  }
  GgufImage& i32s(const std::string& key, const std::vector<int32_t>& v) {
    array(key, 5, v.size());
    for (int32_t x : v) pod(x);
    return *this;
  }
  gguf::File parse() const {
    std::vector<uint8_t> img;
    auto put = [&](const void* p, size_t n) {
      img.insert(img.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    put("GGUF", 4);
    const uint32_t version = 3;
    const uint64_t n_tensors = 0;
    put(&version, 4);
    put(&n_tensors, 8);
    put(&n_kv_, 8);
    put(body_.data(), body_.size());
    image_ = img;
    return gguf::File::parse(image_, "test.gguf");
  }

 private:
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    body_.insert(body_.end(), p, p + sizeof v);
  }
  void string(const std::string& s) {
    pod(uint64_t(s.size()));
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void kv(const std::string& key, uint32_t type) {
    ++n_kv_;
    string(key);
    pod(type);
  }
  void array(const std::string& key, uint32_t elem, size_t n) {
    kv(key, 9);
    pod(elem);
    pod(uint64_t(n));
  }
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> body_;
  mutable std::vector<uint8_t> image_;  // File::parse may keep pointers into it
};

TEST(TokenizerGguf, SentencePieceDefaults) {
  GgufImage g;
  g.str("tokenizer.ggml.model", "llama")
      .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a"})
      .f32s("tokenizer.ggml.scores", {0, 0, 0, -1})
      .i32s("tokenizer.ggml.token_type", {2, 3, 3, 1})
      .u32("tokenizer.ggml.padding_token_id", 4294967295u)
      .str("tokenizer.chat_template", "{{x}}");
  const gguf::File f = g.parse();
  const Vocab v = vocab_from_gguf(f);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens.size(), 4u);
  EXPECT_EQ(v.scores[3], -1.0f);
  EXPECT_EQ(v.types[0], 2);
  EXPECT_EQ(v.bos, 1);  // llama.cpp's SentencePiece defaults
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unk, 0);
  EXPECT_EQ(v.pad, -1);
  EXPECT_EQ(v.eot, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.chat_template, "{{x}}");
  auto t = tokenizer_from_gguf(f);
  EXPECT_EQ(t->encode("a", true, false), (Ids{1, 3}));
}

TEST(TokenizerGguf, BpeKeysAndIntegerScores) {
  GgufImage g;
  g.str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "llama-bpe")
      .strs("tokenizer.ggml.tokens", {"a", "b", "ab", "<|begin_of_text|>"})
      .i32s("tokenizer.ggml.scores", {1, 2, 3, 4})
      .strs("tokenizer.ggml.merges", {"a b"})
      .i32("tokenizer.ggml.bos_token_id", 3)
      .i32("tokenizer.ggml.eos_token_id", -1)
      .boolean("tokenizer.ggml.add_space_prefix", false);
  const Vocab v = vocab_from_gguf(g.parse());
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_EQ(v.scores, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(v.types.empty());
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(v.bos, 3);
  EXPECT_EQ(v.eos, -1);
  EXPECT_EQ(v.unk, -1);
  EXPECT_TRUE(v.add_bos);  // llama3-style pre-tokenizers add BOS by default
  EXPECT_FALSE(v.add_space_prefix);
}

void expect_gguf_error(const GgufImage& g, const std::string& needle) {
  try {
    const gguf::File f = g.parse();
    tokenizer_from_gguf(f);
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(TokenizerGguf, ErrorsNameTheFile) {
  expect_gguf_error(GgufImage().str("tokenizer.ggml.model", "llama"), "tokenizer.ggml.tokens");
  expect_gguf_error(GgufImage().str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", {}), "empty");
  expect_gguf_error(GgufImage().strs("tokenizer.ggml.tokens", {"a"}), "tokenizer.ggml.model");
  expect_gguf_error(GgufImage()
                        .str("tokenizer.ggml.model", "llama")
                        .strs("tokenizer.ggml.tokens", {"a", "b", "c"})
                        .f32s("tokenizer.ggml.scores", {0, 0}),
                    "scores");
  expect_gguf_error(GgufImage()
                        .str("tokenizer.ggml.model", "llama")
                        .strs("tokenizer.ggml.tokens", {"a", "b", "c"})
                        .i32s("tokenizer.ggml.token_type", {1, 1, 1, 1}),
                    "token_type");
  expect_gguf_error(GgufImage()
                        .str("tokenizer.ggml.model", "gpt2")
                        .strs("tokenizer.ggml.tokens", {"a", "b"})
                        .u32("tokenizer.ggml.eos_token_id", 7),
                    "eos_token_id");
  expect_gguf_error(GgufImage()
                        .str("tokenizer.ggml.model", "gpt2")
                        .strs("tokenizer.ggml.tokens", {"a", "b"})
                        .boolean("tokenizer.ggml.add_bos_token", true),
                    "BOS");
  expect_gguf_error(GgufImage().str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "weird").strs(
                        "tokenizer.ggml.tokens", {"a"}),
                    "weird");
  expect_gguf_error(GgufImage().str("tokenizer.ggml.model", "bert").strs("tokenizer.ggml.tokens", {"a"}), "bert");
  expect_gguf_error(
      GgufImage().str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", {"a", "a"}), "duplicate");
}

// ---------------------------------------------------------------- streaming

TEST(TokenizerStream, NeverSplitsACodePoint) {
  auto t = Tokenizer::create(bpe_vocab({}, {}));
  const std::string text = "aé😀b";
  const Ids ids = t->encode(text, false, false);
  ASSERT_EQ(ids.size(), 1u + 2u + 4u + 1u);  // one token per byte
  StreamDecoder s(*t);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(s.push(id));
  EXPECT_EQ(out, (std::vector<std::string>{"a", "", "é", "", "", "", "😀", "b"}));
  EXPECT_EQ(s.flush(), "");
}

TEST(TokenizerStream, InvalidBytesAreReleasedAndTailFlushed) {
  auto t = Tokenizer::create(spm_vocab({{"\xE2\x96\x81", -1}}));
  StreamDecoder s(*t);
  EXPECT_EQ(s.push(3 + 0xFF), "\xFF");          // can never become valid
  EXPECT_EQ(s.push(3 + 0xF0), "");              // start of a 4-byte sequence
  EXPECT_EQ(s.push(3 + 0x9F), "");
  EXPECT_EQ(s.push(3 + 'x'), "\xF0\x9F" "x");   // broken: released as is
  EXPECT_EQ(s.push(3 + 0xE2), "");
  EXPECT_EQ(s.flush(), "\xE2");
  EXPECT_EQ(s.flush(), "");
}

// ---------------------------------------------------------------- chat template

// SmolLM2-135M-Instruct's tokenizer.chat_template, as its GGUF holds it.
const std::string kSmolLm2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
    "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\n' }}{% endif %}";

TEST(TokenizerChat, SmolLm2Template) {
  const ChatTemplate t = detect_chat_template(kSmolLm2Template);
  EXPECT_EQ(t.format, ChatFormat::ChatML);
  EXPECT_EQ(apply_chat_template(t, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n");
  EXPECT_EQ(apply_chat_template(t, {}, true), "<|im_start|>assistant\n");
}

// Templates are told apart by their markers. A ChatML template's default
// system message is its first literal system turn (Qwen2's first one is
// built from a message); "\n" inside a Jinja string becomes a newline; no
// template at all falls back to plain ChatML, as llama.cpp does.
TEST(TokenizerChat, FormatsAreDetectedFromTheirMarkers) {
  const ChatTemplate qwen = detect_chat_template(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}");
  EXPECT_EQ(qwen.format, ChatFormat::ChatML);
  EXPECT_EQ(qwen.default_system, "You are a helpful assistant.");
  const ChatTemplate lit = detect_chat_template("{{ '<|im_start|>system\\nBe kind.\\nAlways.<|im_end|>\\n' }}");
  EXPECT_EQ(lit.default_system, "Be kind.\nAlways.");
  EXPECT_EQ(detect_chat_template("").format, ChatFormat::ChatML);
  EXPECT_EQ(detect_chat_template("").default_system, "");
  EXPECT_EQ(detect_chat_template("{{ bos_token }}<start_of_turn>user ...").format, ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_template("<|start_header_id|>' + message['role'] + '<|end_header_id|>").format,
            ChatFormat::Llama3);
}

TEST(TokenizerChat, GemmaTurnsFoldTheSystemMessageIntoTheFirstUserTurn) {
  const ChatTemplate g{ChatFormat::Gemma, ""};
  EXPECT_EQ(apply_chat_template(g, {{"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello"}, {"user", "Bye"}}),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(apply_chat_template(g, {{"user", "Hi"}}, false), "<start_of_turn>user\nHi<end_of_turn>\n");
}

// A GGUF's Jinja template is rendered, not matched by markers: the tool
// fields reach it, a BOS the vocabulary adds anyway is dropped from the
// front, and a template that refuses the conversation names its line.
TEST(TokenizerChat, JinjaTemplateWithToolsAndBos) {
  Vocab v = bpe_vocab({}, {}, {{"<s>", TokenType::Control}, {"</s>", TokenType::Control}});
  v.bos = 256, v.eos = 257, v.add_bos = true;
  v.chat_template =
      "{{ bos_token }}{% if tools %}[{{ tools | map(attribute='function.name') | join(',') }}]{% endif %}\n"
      "{%- for m in messages %}\n"
      "{%- if m.role == 'bad' %}{{ raise_exception('no bad roles') }}{% endif %}\n"
      "<{{ m.role }}>{{ m.content if m.content is not none else '' }}\n"
      "{%- for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}\n"
      "{%- if m.tool_call_id %}#{{ m.tool_call_id }}:{{ m.name }}{% endif %}\n"
      "{%- endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}";
  auto t = Tokenizer::create(v);
  EXPECT_TRUE(t->chat_template_handles_tools());
  ChatMessage call("assistant", "");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": "é"}}}])");
  ChatMessage result("tool", "42");
  result.tool_call_id = "c1", result.name = "f";
  ChatOptions o;
  o.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(t->apply_chat({{"user", "Hi"}, call, result}, o),
            "[f]<user>Hi<assistant>f({\"z\": 1, \"a\": \"é\"})<tool>42#c1:f<assistant></s>");
  EXPECT_EQ(t->apply_chat({{"user", "Hi"}}, false), "<user>Hi</s>");
  EXPECT_EQ(t->encode(t->apply_chat({{"user", "Hi"}}, false), true, true).front(), 256);  // one BOS, from encode
  try {
    t->apply_chat({{"bad", "x"}});
    FAIL() << "raise_exception did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat template line 3: no bad roles");
  }
  v.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  EXPECT_FALSE(Tokenizer::create(v)->chat_template_handles_tools());
}

// A template that does not parse is found once, when the tokenizer is made:
// the model still loads and encodes text; a chat names the template's error.
TEST(TokenizerChat, UnparsableTemplateLoadsAndChatNamesTheError) {
  Vocab v = bpe_vocab({}, {}, {});
  v.chat_template = "{% for m in messages %}{{ m.content }}";
  auto t = Tokenizer::create(v);
  EXPECT_FALSE(t->chat_template_handles_tools());
  EXPECT_FALSE(t->encode("hi", false, false).empty());
  for (int i = 0; i < 2; ++i) {
    try {
      t->apply_chat({{"user", "Hi"}});
      FAIL() << "an unparsable template rendered";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("chat template line 1: ", 0), 0u) << e.what();
    }
  }
}

TEST(TokenizerChat, Llama3Headers) {
  const ChatTemplate l{ChatFormat::Llama3, ""};
  EXPECT_EQ(apply_chat_template(l, {{"system", "Be brief."}, {"user", " Hi "}}),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

}  // namespace
}  // namespace kvlab::tokenizer

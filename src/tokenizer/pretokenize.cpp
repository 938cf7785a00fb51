// Hand-written matchers for the pre-tokenizer regexes. Semantics are those of
// a backtracking regex engine (first alternative that matches wins, greedy
// quantifiers), which is what llama.cpp's custom splitters and its std::regex
// fallback both implement; see pretokenize.h for the patterns.
#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace kvlab::tokenizer {

namespace {

using unicode::is_letter;
using unicode::is_number;
using unicode::is_space;

// "Other": [^\s\p{L}\p{N}]. Unassigned code points are "other" too.
bool is_other(uint8_t f) { return !is_space(f) && !is_letter(f) && !is_number(f); }

bool is_ascii_lower(uint32_t c, char lower) { return c == uint32_t(lower) || c == uint32_t(lower - 'a' + 'A'); }

// One pass over the words of the previous step. Word boundaries are never
// crossed: a position outside [b, e) reads as "no character".
struct Pass {
  const std::vector<uint32_t>& cps;
  const std::vector<uint8_t>& fl;
  std::vector<size_t>& out;
  size_t b = 0, e = 0, prev = 0;

  static constexpr uint32_t kNone = 0xFFFFFFFF;
  uint32_t cp(size_t i) const { return i < e ? cps[i] : kNone; }
  // flags of "no character": none of letter/number/space/other.
  bool letter(size_t i) const { return i < e && is_letter(fl[i]); }
  bool number(size_t i) const { return i < e && is_number(fl[i]); }
  bool space(size_t i) const { return i < e && is_space(fl[i]); }
  bool other(size_t i) const { return i < e && is_other(fl[i]); }
  bool line_break(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

  // Close the current word at `end` (empty words are dropped).
  void cut(size_t end) {
    if (end > prev) out.push_back(end - prev);
    prev = end;
  }

  // 's 't 'm 'd 're 've 'll at `pos`; returns the match length or 0.
  size_t contraction(size_t pos, bool any_case) const {
    if (cp(pos) != '\'' || pos + 1 >= e) return 0;
    auto eq = [&](size_t i, char c) { return any_case ? is_ascii_lower(cp(i), c) : cp(i) == uint32_t(c); };
    if (eq(pos + 1, 's') || eq(pos + 1, 't') || eq(pos + 1, 'm') || eq(pos + 1, 'd')) return 2;
    if (pos + 2 < e && ((eq(pos + 1, 'r') && eq(pos + 2, 'e')) || (eq(pos + 1, 'v') && eq(pos + 2, 'e')) ||
                        (eq(pos + 1, 'l') && eq(pos + 2, 'l'))))
      return 3;
    return 0;
  }

  // \s+(?!\S) | \s+ : a run of spaces followed by a non-space gives all but
  // its last space (which then prefixes the next word); otherwise all of it.
  size_t trailing_space_run(size_t pos) const {
    size_t n = 0;
    while (space(pos + n)) ++n;
    if (n > 1 && pos + n < e) return n - 1;
    return n;
  }

  void gpt2() {
    size_t pos = b;
    while (pos < e) {
      if (size_t n = contraction(pos, false)) {
        cut(pos += n);
        continue;
      }
      // " ?X+" for X in letter, number, other: an optional single ' ' first.
      const size_t q = pos + (cp(pos) == ' ' ? 1 : 0);
      if (letter(q)) {
        pos = q;
        while (letter(pos)) ++pos;
        cut(pos);
        continue;
      }
      if (number(q)) {
        pos = q;
        while (number(pos)) ++pos;
        cut(pos);
        continue;
      }
      if (other(q)) {
        pos = q;
        while (other(pos)) ++pos;
        cut(pos);
        continue;
      }
      if (size_t n = trailing_space_run(pos)) {
        cut(pos += n);
        continue;
      }
      cut(++pos);  // unreachable in practice: every character is one of the above
    }
  }

  // Llama 3's letter alternatives: (?i:'s|'t|'re|'ve|'m|'ll|'d) first,
  // then [^\r\n\p{L}\p{N}]?\p{L}+. Returns the end of the match, or pos.
  size_t llama3_word(size_t pos) const {
    if (size_t n = contraction(pos, true)) return pos + n;
    if (!line_break(pos) && !number(pos) && (letter(pos) || letter(pos + 1))) {
      ++pos;
      while (letter(pos)) ++pos;
    }
    return pos;
  }

  // GPT-4o's letter alternatives, as llama.cpp runs them: on its collapsed
  // text an "upper" letter is any letter but a-z and a "lower" one any
  // letter but A-Z (letters outside ASCII are both; marks are neither):
  //   P?U*L+C? | P?U+L*C?    P = [^\r\n\p{L}\p{N}], C = (?i:'s|'t|'re|'ve|'m|'ll|'d)
  // (Tekken's pattern has no C). Returns the end of the match, or pos.
  bool upper(size_t i) const { return letter(i) && !(cps[i] >= 'a' && cps[i] <= 'z'); }
  bool lower(size_t i) const { return letter(i) && !(cps[i] >= 'A' && cps[i] <= 'Z'); }
  size_t cased_word(size_t pos, bool contractions) const {
    const size_t q = pos + (!line_break(pos) && !letter(pos) && !number(pos) ? 1 : 0);
    size_t u = q;
    while (upper(u)) ++u;
    // U* backtracks from its longest run to the last place an L+ can start;
    // where none can, U+L* takes the run (no L follows it, or U*L+ would
    // have matched there).
    size_t end = u;
    for (size_t k = u + 1; k-- > q;)
      if (lower(k)) {
        for (end = k; lower(end);) ++end;
        break;
      }
    if (end == q) return pos;
    return contractions ? end + contraction(end, true) : end;
  }

  // Llama 3's pattern, and GPT-4o's and Tekken's (`cased`):
  //   <letter alternatives> | \p{N}{1,K} | ?[^\s\p{L}\p{N}]+[\r\n]*  (GPT-4o: [\r\n/]*)
  //   | \s*[\r\n]+ | \s+(?!\S) | \s+
  void llama3(int max_digits, bool cased, bool contractions = true) {
    size_t pos = b;
    while (pos < e) {
      if (const size_t end = cased ? cased_word(pos, contractions) : llama3_word(pos); end > pos) {
        cut(pos = end);
        continue;
      }
      // \p{N}{1,K}: greedy groups of K, left to right.
      if (number(pos)) {
        size_t start = pos;
        while (number(pos)) {
          if (int(++pos - start) >= max_digits) {
            cut(pos);
            start = pos;
          }
        }
        cut(pos);
        continue;
      }
      const size_t q = pos + (cp(pos) == ' ' ? 1 : 0);
      if (other(q)) {
        pos = q;
        while (other(pos)) ++pos;
        while (line_break(pos) || (cased && cp(pos) == '/')) ++pos;
        cut(pos);
        continue;
      }
      // \s*[\r\n]+ : up to the last line break inside the space run.
      size_t n = 0, last_break = 0;
      while (space(pos + n)) {
        if (line_break(pos + n)) last_break = pos + n + 1;
        ++n;
      }
      if (last_break) {
        cut(pos = last_break);
        continue;
      }
      if (size_t m = trailing_space_run(pos)) {
        cut(pos += m);
        continue;
      }
      cut(++pos);
    }
  }

  // A single-class regex (no alternation) run through regex_iterator: every
  // match is a word and so is each stretch between matches. Matches are runs
  // of `pred` code points of length [min_len, max_len] taken greedily.
  template <class Pred>
  void class_split(Pred pred, size_t min_len, size_t max_len) {
    size_t pos = b;
    while (pos < e) {
      if (!pred(pos)) {
        ++pos;
        continue;
      }
      size_t run = 0;
      while (pos + run < e && pred(pos + run)) ++run;
      size_t left = run;
      while (left >= min_len) {
        const size_t len = std::min(left, max_len);
        cut(pos);         // text before the match
        cut(pos += len);  // the match
        left -= len;
      }
      pos += left;  // a too-short tail joins the text that follows
    }
    cut(e);
  }
};

bool ascii_punct_or_listed(uint32_t c, bool with_backtick) {
  // \p{P} for ASCII is !"#%&'()*,-./:;?@[\]_{} ; the pattern adds $+<=>^~|.
  static const std::string kSet = "!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|";
  if (c == '`') return with_backtick;
  return c < 128 && kSet.find(char(c)) != std::string::npos;
}

}  // namespace

std::vector<size_t> PreTokenizer::split(const std::vector<uint32_t>& cpts) const {
  std::vector<uint8_t> fl(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) fl[i] = unicode::flags(cpts[i]);

  std::vector<size_t> words;
  if (!cpts.empty()) words.push_back(cpts.size());
  for (SplitStep step : steps) {
    std::vector<size_t> next;
    next.reserve(words.size() * 2 + 8);
    Pass pass{cpts, fl, next};
    size_t start = 0;
    for (size_t len : words) {
      pass.b = pass.prev = start;
      pass.e = start + len;
      switch (step) {
        case SplitStep::Gpt2:
          pass.gpt2();
          break;
        case SplitStep::Llama3:
          pass.llama3(max_digits, false);
          break;
        case SplitStep::Gpt4o:
          pass.llama3(max_digits, true, cased_contractions);
          break;
        case SplitStep::NumberEach:
          pass.class_split([&](size_t i) { return is_number(fl[i]); }, 1, 1);
          break;
        case SplitStep::NumberRun:
          pass.class_split([&](size_t i) { return is_number(fl[i]); }, 1, std::numeric_limits<size_t>::max());
          break;
        case SplitStep::AsciiDigits3:
          pass.class_split([&](size_t i) { return cpts[i] >= '0' && cpts[i] <= '9'; }, 3, 3);
          break;
        case SplitStep::PunctRun:
        case SplitStep::PunctRunTick: {
          const bool tick = step == SplitStep::PunctRunTick;
          auto pred = [&](size_t i) {
            if (cpts[i] < 128) return ascii_punct_or_listed(cpts[i], tick);
            return !is_space(fl[i]) && unicode::is_punct(fl[i]);
          };
          pass.class_split(pred, 1, std::numeric_limits<size_t>::max());
          break;
        }
      }
      start += len;
    }
    words.swap(next);
  }
  return words;
}

namespace {

template <size_t N>
bool one_of(std::string_view s, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

// Families as llama.cpp groups them (llama-vocab.cpp, pre-tokenizer types).
constexpr std::string_view kGpt2Names[] = {"gpt-2",   "gpt2",   "phi-2",    "mpt",
                                           "olmo",    "jais",   "trillion", "granite-docling",
                                           "exaone4", "mellum", "a.x-4.0",  "gigachat"};
constexpr std::string_view kSmollmNames[] = {"smollm",    "starcoder", "refact",     "command-r",
                                             "codeshell", "exaone",    "minerva-7b", "mellum2"};
constexpr std::string_view kLlama3Names[] = {"llama3",  "llama-v3", "llama-bpe", "falcon3",     "falcon-h1",
                                             "pixtral", "midm-2.0", "lfm2",      "jina-v5-nano"};
constexpr std::string_view kLlama3NoIgnoreNames[] = {"dbrx", "smaug-bpe"};
constexpr std::string_view kGpt4oNames[] = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"};
constexpr std::string_view kQwen2Names[] = {"qwen2",     "deepseek-r1-qwen", "kormo",      "f2llmv2", "megrez",
                                            "stablelm2", "hunyuan",          "solar-open", "grok-2"};

}  // namespace

PreTokenizer make_pretokenizer(std::string_view pre) {
  PreTokenizer p;
  if (pre.empty() || pre == "default") {
    p.steps = {SplitStep::PunctRun, SplitStep::Gpt2, SplitStep::NumberRun, SplitStep::AsciiDigits3};
  } else if (pre == "falcon") {
    p.steps = {SplitStep::PunctRunTick, SplitStep::Gpt2, SplitStep::AsciiDigits3};
  } else if (one_of(pre, kGpt2Names)) {
    p.steps = {SplitStep::Gpt2};
  } else if (one_of(pre, kSmollmNames)) {
    p.steps = {SplitStep::NumberEach, SplitStep::Gpt2};
  } else if (one_of(pre, kLlama3Names)) {
    p.steps = {SplitStep::Llama3};
    p.ignore_merges = true;
  } else if (one_of(pre, kLlama3NoIgnoreNames)) {
    p.steps = {SplitStep::Llama3};
  } else if (one_of(pre, kGpt4oNames)) {
    p.steps = {SplitStep::Gpt4o};
  } else if (pre == "tekken") {  // Mistral's: GPT-4o's words without contractions, digits one by one
    p.steps = {SplitStep::Gpt4o};
    p.max_digits = 1;
    p.cased_contractions = false;
    p.ignore_merges = true;
  } else if (one_of(pre, kQwen2Names)) {
    p.steps = {SplitStep::Llama3};
    p.max_digits = 1;
  } else {
    throw Error(
        "unknown BPE pre-tokenizer '" + std::string(pre) +
        "' (tokenizer.ggml.pre); supported: default, gpt2, smollm, llama3/llama-bpe, qwen2, gpt-4o, tekken, falcon and aliases");
  }
  return p;
}

bool pre_default_add_bos(std::string_view pre) { return one_of(pre, kLlama3Names) || pre == "tekken"; }

}  // namespace kvlab::tokenizer

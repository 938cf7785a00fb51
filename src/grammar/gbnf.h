// GBNF, llama.cpp's grammar format (its grammars/README.md):
//
//   root   ::= answer ("," answer)*     # rules; the root is named "root"
//   answer ::= "yes" | "no" | [0-9]{1,3}
//
// Alternatives `|`, grouping `( )`, repetition `*` `+` `?` `{m}` `{m,}`
// `{m,n}`, string literals with escapes (\n \r \t \\ \" \xHH \uHHHH
// \UHHHHHHHH), character classes `[a-z_]` and their complements `[^"\\]`,
// `.` (any character), and `#` comments. A rule ends at the end of its line
// unless the next line goes on with `|`, or a group is still open.
// Repetition and groups become helper rules, so the matcher only ever sees
// sequences and alternatives (grammar/grammar.h).
#pragma once
#include <string_view>

#include "grammar/grammar.h"

namespace kvlab::grammar {

// Every repetition count is at most this: {m,n} is unrolled into n copies.
inline constexpr int kMaxRepetition = 1000;
// Bounds on what one grammar may cost, whatever its text: groups nested at
// most this deep (the parser recurses into them), at most this many rules
// (the matcher recurses along chains of them) and symbols.
inline constexpr int kMaxNesting = 128;
inline constexpr size_t kMaxRules = 20000;
inline constexpr size_t kMaxSymbols = 2000000;

// Parses and compiles a grammar; throws kvlab::Error "grammar line L,
// column C: ..." for a syntax error or an unknown rule name, and
// Grammar::compile's errors for left recursion or an empty language.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace kvlab::grammar

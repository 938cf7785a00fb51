// A regular expression (JSON Schema's `pattern`, ECMA-262 syntax) as a GBNF
// expression over the inside of a JSON string: the escaped text between
// the quotes, so a '"' or '\' the regex allows comes out as \" or \\.
//
// The subset: literals and escaped metacharacters, `.`, classes `[a-z]`
// `[^...]` with \d \w \s and their complements, groups `( )` and `(?: )`,
// alternation, and the quantifiers * + ? {m} {m,} {m,n} (a lazy `?` after
// them changes nothing for a grammar). Without ^ or $ the pattern may match
// anywhere in the string (JSON Schema patterns are not anchored). Classes,
// `.` and the complements never produce '"', '\' or control characters
// (they would need escapes): the output stays valid JSON and matches the
// regex, on a slightly smaller set of strings. Throws kvlab::Error for
// anything else (back-references, look-around, word boundaries).
#pragma once
#include <string>
#include <string_view>

namespace kvlab::grammar {

std::string regex_to_gbnf(std::string_view pattern);

}  // namespace kvlab::grammar

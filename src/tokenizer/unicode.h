// UTF-8 and code point helpers for the tokenizers (internal to tokenizer/).
//
// Decoding follows llama.cpp's lenient rules on purpose, because token ids are
// compared id-for-id against it: a lead byte decides the length (no overlong
// or surrogate check), and a sequence that is cut short or has a bad
// continuation byte yields U+FFFD for its first byte only, then decoding
// resumes at the next byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"
#include "tokenizer/unicode_tables.h"

namespace kvlab::tokenizer::unicode {

inline constexpr uint32_t kReplacement = 0xFFFD;

// seq_len (a lead byte's sequence length) and append_utf8 (common/utf8.h).
using utf8::append_utf8;
using utf8::seq_len;

// Decode `text` into code points (lenient, see above). Code points above
// U+10FFFF (lead bytes F5..F7) become U+FFFD so every result re-encodes.
std::vector<uint32_t> decode_lenient(std::string_view text);

// Flags of a code point: class (unicode_tables::kClassMask) | kWhitespace.
uint8_t flags(uint32_t cp);

inline bool is_letter(uint8_t f) { return (f & unicode_tables::kClassMask) == unicode_tables::kLetter; }
inline bool is_number(uint8_t f) { return (f & unicode_tables::kClassMask) == unicode_tables::kNumber; }
inline bool is_space(uint8_t f) { return (f & unicode_tables::kWhitespace) != 0; }
inline bool is_punct(uint8_t f) { return (f & unicode_tables::kClassMask) == unicode_tables::kPunctuation; }

// GPT-2 byte-level BPE maps every byte to a printable code point so that
// merges never see raw control bytes or spaces: bytes '!'..'~', 0xA1..0xAC
// and 0xAE..0xFF map to themselves, the other 68 bytes to U+0100.. in order.
uint32_t byte_to_cp(uint8_t b);
// Inverse of byte_to_cp; returns -1 for code points outside the mapping.
int cp_to_byte(uint32_t cp);

// Longest prefix of `s` (byte count) that ends on a code point boundary:
// a trailing lead byte whose continuation bytes have not all arrived yet is
// held back; anything invalid counts as complete (it will never become valid).
size_t complete_prefix(std::string_view s);

}  // namespace kvlab::tokenizer::unicode

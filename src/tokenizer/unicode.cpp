#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace kvlab::tokenizer::unicode {

namespace {

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Flags for U+0000..U+007F, looked up once; ASCII dominates real text.
const std::array<uint8_t, 128>& ascii_flags() {
  static const std::array<uint8_t, 128> table = [] {
    std::array<uint8_t, 128> t{};
    for (uint32_t cp = 0; cp < 128; ++cp) {
      const auto* end = unicode_tables::kRangeStart + unicode_tables::kRangeCount;
      const auto* it = std::upper_bound(unicode_tables::kRangeStart, end, cp);
      t[cp] = unicode_tables::kRangeFlags[(it - unicode_tables::kRangeStart) - 1];
    }
    return t;
  }();
  return table;
}

struct ByteMaps {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // all mapped code points are < 0x200
};

const ByteMaps& byte_maps() {
  static const ByteMaps maps = [] {
    ByteMaps m;
    m.from_cp.fill(-1);
    auto keeps_itself = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      m.to_cp[b] = keeps_itself(b) ? uint32_t(b) : next++;
      m.from_cp[m.to_cp[b]] = int16_t(b);
    }
    return m;
  }();
  return maps;
}

}  // namespace

std::vector<uint32_t> decode_lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = is_cont(p[i + k]);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok && cp <= 0x10FFFF) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(kReplacement);  // one bad byte -> one U+FFFD, like llama.cpp
      ++i;
    }
  }
  return out;
}

uint8_t flags(uint32_t cp) {
  if (cp < 128) return ascii_flags()[cp];
  if (cp >= 0x110000) return unicode_tables::kUndefined;
  const auto* end = unicode_tables::kRangeStart + unicode_tables::kRangeCount;
  const auto* it = std::upper_bound(unicode_tables::kRangeStart, end, cp);
  return unicode_tables::kRangeFlags[(it - unicode_tables::kRangeStart) - 1];
}

uint32_t byte_to_cp(uint8_t b) { return byte_maps().to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < 512 ? byte_maps().from_cp[cp] : -1; }

size_t complete_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    size_t len = 1;
    if ((b & 0xE0) == 0xC0)
      len = 2;
    else if ((b & 0xF0) == 0xE0)
      len = 3;
    else if ((b & 0xF8) == 0xF0)
      len = 4;
    if (len == 1) {  // ASCII, stray continuation or invalid lead: final as is
      ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < n && is_cont(p[i + k])) ++k;
    if (k == len) {
      i += len;  // complete sequence
    } else if (i + k == n) {
      return i;  // valid so far but cut short: wait for more bytes
    } else {
      ++i;  // broken sequence: release the lead byte alone
    }
  }
  return n;
}

}  // namespace kvlab::tokenizer::unicode

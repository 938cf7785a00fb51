#include "jinja/strings.h"

namespace kvlab::jinja {

bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string strip(std::string_view s, std::string_view chars, bool left, bool right) {
  const auto strippable = [&](char c) {
    return chars.empty() ? is_python_space(c) : chars.find(c) != std::string_view::npos;
  };
  while (left && !s.empty() && strippable(s.front())) s.remove_prefix(1);
  while (right && !s.empty() && strippable(s.back())) s.remove_suffix(1);
  return std::string(s);
}

char upper_ascii(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }
char lower_ascii(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

std::string to_upper(std::string s) {
  for (char& c : s) c = upper_ascii(c);
  return s;
}

std::string to_lower(std::string s) {
  for (char& c : s) c = lower_ascii(c);
  return s;
}

std::string capitalize(std::string s) {
  if (s.empty()) return s;
  return to_upper(s.substr(0, 1)) + to_lower(s.substr(1));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, long long count) {
  if (from.empty()) return s;
  std::string out;
  size_t at = 0;
  for (long long n = 0; count < 0 || n < count; ++n) {
    const size_t found = s.find(from, at);
    if (found == std::string::npos) break;
    out.append(s, at, found - at);
    out += to;
    at = found + from.size();
  }
  return out + s.substr(at);
}

}  // namespace kvlab::jinja

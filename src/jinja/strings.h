// Python's str operations that both filters and methods use. Case mapping
// covers ASCII letters only (chat templates change the case of role names
// and keywords).
#pragma once
#include <string>
#include <string_view>

namespace kvlab::jinja {

// Python's whitespace for str.strip()/split() without arguments.
bool is_python_space(char c);
// str.strip(chars): chars empty means whitespace.
std::string strip(std::string_view s, std::string_view chars, bool left, bool right);
char upper_ascii(char c);
char lower_ascii(char c);
std::string to_upper(std::string s);
std::string to_lower(std::string s);
// str.capitalize(): the first character upper case, the rest lower case.
std::string capitalize(std::string s);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(const std::string& s, const std::string& from, const std::string& to, long long count);

}  // namespace kvlab::jinja

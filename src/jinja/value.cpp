#include "jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/utf8.h"
#include "jinja/error.h"

namespace kvlab::jinja {

const Value* CallArgs::find_keyword(std::string_view name) const {
  for (const auto& [key, value] : keyword)
    if (key == name) return &value;
  return nullptr;
}

const Value* CallArgs::find(size_t index, std::string_view name) const {
  if (const Value* v = find_keyword(name)) return v;
  return index < positional.size() ? &positional[index] : nullptr;
}

bool absent_or_none(const Value* v) { return !v || (v->is_data() && v->data().is_null()); }

bool python_truthy(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer: return j.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return j.get<uint64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    default: return !j.empty();
  }
}

const Json& Value::data() const {
  static const Json null;
  return data_ ? *data_ : null;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined: return false;
    case Kind::Data: return python_truthy(*data_);
    default: return true;
  }
}

namespace {

// Python's repr() of a float (which json.dumps prints too): the fewest
// significant digits that read back as the same double, written positionally
// for decimal exponents -4 to 15 ("100.0", "0.0001") and as d.ddde+XX
// otherwise ("1e+16", "1e-05").
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  const std::string text = buf;  // [-]d.ddde[+-]xx
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (text[i] >= '0' && text[i] <= '9') digits += text[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = std::signbit(d) ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out.append(".").append(digits, 1);
    std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out.append(buf);
  }
  if (exponent < 0) return out.append("0.").append(size_t(-exponent - 1), '0').append(digits);
  const size_t whole = size_t(exponent) + 1;
  if (digits.size() <= whole) return out.append(digits).append(whole - digits.size(), '0').append(".0");
  return out.append(digits, 0, whole).append(".").append(digits, whole);
}

// repr() of a str: single quotes unless the text holds a single quote and
// no double quote; backslash escapes for the quote, backslash and control
// characters.
std::string string_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + quote;
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const Json& j, int indent, int depth) {
  const bool is_array = j.is_array();
  if (!is_array && !j.is_object()) {
    if (j.is_string())
      append_json_string(out, j.get_ref<const std::string&>());
    else if (j.is_number_float())
      out += float_repr(j.get<double>());
    else
      out += j.dump();
    return;
  }
  if (j.empty()) {
    out += is_array ? "[]" : "{}";
    return;
  }
  const auto new_line = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(level), ' ');
  };
  out += is_array ? '[' : '{';
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += indent < 0 ? ", " : ",";
    first = false;
    new_line(depth + 1);
    if (!is_array) {
      append_json_string(out, it.key());
      out += ": ";
    }
    append_json(out, it.value(), indent, depth + 1);
  }
  new_line(depth);
  out += is_array ? ']' : '}';
}

}  // namespace

std::string python_repr(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_float: return float_repr(j.get<double>());
    case Json::value_t::string: return string_repr(j.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + python_repr(j[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it, first = false)
        out += (first ? "" : ", ") + string_repr(it.key()) + ": " + python_repr(it.value());
      return out + "}";
    }
    default: return j.dump();  // integers
  }
}

std::string python_str(const Json& j) { return j.is_string() ? j.get<std::string>() : python_repr(j); }

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::Data: return python_str(*data_);
    case Kind::Namespace: return "<Namespace>";
    default: return "<function>";
  }
}

const Json& Value::as_data(const char* what) const {
  if (kind_ == Kind::Data) return *data_;
  if (kind_ == Kind::Undefined) throw EvalError("'" + undefined_name_ + "' is undefined (" + what + ")");
  throw EvalError(std::string(kind_ == Kind::Namespace ? "a namespace" : "a function") + " cannot be used in " + what);
}

std::string to_json_text(const Json& j, int indent) {
  std::string out;
  append_json(out, j, indent, 0);
  return out;
}

std::vector<size_t> code_point_offsets(const std::string& text) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < text.size(); i += utf8::seq_len(static_cast<uint8_t>(text[i]))) offsets.push_back(i);
  offsets.push_back(text.size());
  return offsets;
}

}  // namespace kvlab::jinja

#include "server/tool_call_stream.h"

#include <random>

namespace kvlab::server {
namespace {

using nlohmann::json;

bool blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string new_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

// The format's literals between calls, without blanks: the grammar lets
// schema-ws stand between them, so blanks are not compared.
std::string without_blanks(std::string_view text) {
  std::string out;
  for (char c : text)
    if (!blank(c)) out += c;
  return out;
}

}  // namespace

ToolCallStream::ToolCallStream(const ToolFormat& format)
    : opening_(format.opening()), closing_(without_blanks(std::string(format.call_close) + std::string(format.close))) {}

std::vector<json> ToolCallStream::feed(std::string_view text) {
  std::vector<json> out;
  for (char c : text) step(c, out);
  if (phase_ == Phase::Arguments) flush(out);
  return out;
}

bool ToolCallStream::done() const { return phase_ == Phase::AfterCall && after_call_ == closing_; }

void ToolCallStream::start_call() {
  ++index_;
  name_.clear();
  phase_ = Phase::BeforeName;
}

void ToolCallStream::step(char c, std::vector<json>& out) {
  switch (phase_) {
    case Phase::Opening:  // the format's literals, then the first call's '{'
      if (c != opening_[opening_seen_]) phase_ = Phase::Text;
      else if (++opening_seen_ == opening_.size()) start_call();
      return;
    case Phase::BeforeName:  // "name" and its colon: no colon before it
      if (c == ':') phase_ = Phase::Name;
      return;
    case Phase::Name: return name_char(c, out);
    case Phase::BeforeArguments:  // "," the arguments' key and its colon
      if (c == ':') {
        phase_ = Phase::Arguments;
        started_ = in_string_ = escaped_ = false;
        depth_ = 0;
      }
      return;
    case Phase::Arguments: return arguments_char(c, out);
    case Phase::AfterArguments:  // blanks, then the call's '}'
      if (c == '}') {
        after_call_.clear();
        phase_ = Phase::AfterCall;
      }
      return;
    case Phase::AfterCall:  // call_close, then close or separator + call_open and the next '{'
      if (c == '{') start_call();
      else if (!blank(c)) after_call_ += c;
      return;
    case Phase::Text: return;
  }
}

void ToolCallStream::name_char(char c, std::vector<json>& out) {
  if (name_.empty() && c != '"') return;  // blanks before the string
  name_ += c;
  if (name_.size() == 1) return;
  if (escaped_) {
    escaped_ = false;
  } else if (c == '\\') {
    escaped_ = true;
  } else if (c == '"') {
    out.push_back({{"index", index_},
                   {"id", new_call_id()},
                   {"type", "function"},
                   {"function", {{"name", json::parse(name_).get<std::string>()}, {"arguments", ""}}}});
    phase_ = Phase::BeforeArguments;
  }
}

// The arguments' value as written: an object or array ends at the bracket
// that closes it, a string at its closing quote, a number or literal at the
// first character past it.
void ToolCallStream::arguments_char(char c, std::vector<json>& out) {
  if (!started_ && blank(c)) return;
  if (started_ && depth_ == 0 && !in_string_ && (blank(c) || c == '}')) {
    flush(out);
    phase_ = Phase::AfterArguments;
    return step(c, out);
  }
  started_ = true;
  piece_ += c;
  if (in_string_) {
    if (escaped_) escaped_ = false;
    else if (c == '\\') escaped_ = true;
    else if (c == '"') in_string_ = false;
  } else if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if (c == '}' || c == ']') {
    --depth_;
  }
  if (depth_ == 0 && !in_string_ && (c == '}' || c == ']' || c == '"')) {
    flush(out);
    phase_ = Phase::AfterArguments;
  }
}

void ToolCallStream::flush(std::vector<json>& out) {
  if (piece_.empty()) return;
  out.push_back({{"index", index_}, {"function", {{"arguments", piece_}}}});
  piece_.clear();
}

}  // namespace kvlab::server

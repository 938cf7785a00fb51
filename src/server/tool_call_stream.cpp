#include "server/tool_call_stream.h"

#include <cstring>
#include <random>

#include "server/tool_calls.h"

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

}  // namespace

std::vector<json> ToolCallStream::feed(std::string_view text) {
  std::vector<json> out;
  for (char c : text) step(c, out);
  if (phase_ == Phase::Arguments) flush(out);
  return out;
}

void ToolCallStream::step(char c, std::vector<json>& out) {
  switch (phase_) {
    case Phase::Marker:
      if (c != kToolCallMarker[marker_seen_]) phase_ = Phase::Text;
      else if (++marker_seen_ == std::strlen(kToolCallMarker)) phase_ = Phase::Open;
      return;
    case Phase::Open:
      if (c == '[') phase_ = Phase::BeforeCall;
      return;
    case Phase::BeforeCall:
      if (c == '{') {
        ++index_;
        name_.clear();
        phase_ = Phase::BeforeName;
      }
      return;
    case Phase::BeforeName:  // "name" and its colon: no colon before it
      if (c == ':') phase_ = Phase::Name;
      return;
    case Phase::Name: return name_char(c, out);
    case Phase::BeforeArguments:  // "," "arguments" and its colon
      if (c == ':') {
        phase_ = Phase::Arguments;
        started_ = in_string_ = escaped_ = false;
        depth_ = 0;
      }
      return;
    case Phase::Arguments: return arguments_char(c, out);
    case Phase::AfterCall:  // the call's '}', then ',' or the array's ']'
      if (c == ',') phase_ = Phase::BeforeCall;
      if (c == ']') phase_ = Phase::Done;
      return;
    case Phase::Done:
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
    phase_ = Phase::AfterCall;
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
    phase_ = Phase::AfterCall;
  }
}

void ToolCallStream::flush(std::vector<json>& out) {
  if (piece_.empty()) return;
  out.push_back({{"index", index_}, {"function", {{"arguments", piece_}}}});
  piece_.clear();
}

}  // namespace kvlab::server

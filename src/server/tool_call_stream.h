// Reads a tool-call reply (server/tool_calls.h: the marker, then a JSON
// array of {"name": ..., "arguments": ...}) as it is generated, so a stream
// can send each call as OpenAI's delta.tool_calls do: the call's index, a
// new id and its name as soon as the name is whole, then the arguments'
// text piece by piece as it comes. The grammar guarantees the shape, so a
// scanner that follows it (strings, escapes and bracket depth) is enough.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kvlab::server {

class ToolCallStream {
 public:
  // Takes the reply's next text; returns the delta.tool_calls entries it
  // completes: {"index", "id", "type", "function": {"name", "arguments": ""}}
  // for a call whose name is now whole, {"index", "function": {"arguments":
  // piece}} for the arguments' text so far.
  std::vector<nlohmann::json> feed(std::string_view text);
  // The array has closed: every call is whole.
  bool done() const { return phase_ == Phase::Done; }
  // The reply does not start with the marker: it is text.
  bool text() const { return phase_ == Phase::Text; }

 private:
  enum class Phase { Marker, Open, BeforeCall, BeforeName, Name, BeforeArguments, Arguments, AfterCall, Done, Text };
  // Scans one character of the reply; appends to `out` what it completes.
  void step(char c, std::vector<nlohmann::json>& out);
  void name_char(char c, std::vector<nlohmann::json>& out);
  void arguments_char(char c, std::vector<nlohmann::json>& out);
  void flush(std::vector<nlohmann::json>& out);  // the arguments' text so far, if any

  Phase phase_ = Phase::Marker;
  size_t marker_seen_ = 0;  // bytes of the marker so far
  int index_ = -1;          // the call being read
  std::string name_;        // its name as written (a JSON string)
  std::string piece_;       // arguments text not yet returned
  bool started_ = false;    // the arguments' first character is seen
  bool in_string_ = false, escaped_ = false;
  int depth_ = 0;           // open brackets inside the arguments
};

}  // namespace kvlab::server

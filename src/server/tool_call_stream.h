// Reads a tool-call reply in a ToolFormat (server/tool_format.h: calls
// {"name": ..., "<arguments_key>": ...} between the format's literals) as
// it is generated, so a stream can send each call as OpenAI's
// delta.tool_calls do: the call's index, a new id and its name as soon as
// the name is whole, then the arguments' text piece by piece as it comes. The grammar guarantees the shape, so a
// scanner that follows it (strings, escapes and bracket depth) is enough.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_format.h"

namespace kvlab::server {

class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolFormat& format = kGenericTools);

  // Takes the reply's next text; returns the delta.tool_calls entries it
  // completes: {"index", "id", "type", "function": {"name", "arguments": ""}}
  // for a call whose name is now whole, {"index", "function": {"arguments":
  // piece}} for the arguments' text so far.
  std::vector<nlohmann::json> feed(std::string_view text);
  // The last call and the format's closing literals are whole.
  bool done() const;
  // The reply does not start with the format's opening: it is text.
  bool text() const { return phase_ == Phase::Text; }

 private:
  enum class Phase { Opening, BeforeName, Name, BeforeArguments, Arguments, AfterArguments, AfterCall, Text };
  // Scans one character of the reply; appends to `out` what it completes.
  void step(char c, std::vector<nlohmann::json>& out);
  void name_char(char c, std::vector<nlohmann::json>& out);
  void arguments_char(char c, std::vector<nlohmann::json>& out);
  void flush(std::vector<nlohmann::json>& out);  // the arguments' text so far, if any
  void start_call();

  std::string opening_;      // the format's text up to the first call's '{'
  std::string closing_;      // its text after the last call's '}', blanks left out
  Phase phase_ = Phase::Opening;
  size_t opening_seen_ = 0;  // bytes of the opening so far
  std::string after_call_;   // the text after the current call's '}', blanks left out
  int index_ = -1;           // the call being read
  std::string name_;         // its name as written (a JSON string)
  std::string piece_;        // arguments text not yet returned
  bool started_ = false;     // the arguments' first character is seen
  bool in_string_ = false, escaped_ = false;
  int depth_ = 0;            // open brackets inside the arguments
};

}  // namespace kvlab::server

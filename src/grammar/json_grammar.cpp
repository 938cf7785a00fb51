#include "grammar/json_grammar.h"

#include "grammar/gbnf.h"

namespace kvlab::grammar {
namespace {

// A container at depth d: its members' values are json-value-d; a value
// at the deepest level cannot open another container.
std::string containers_at(int d) {
  const std::string n = std::to_string(d), v = "json-value-" + n;
  std::string out;
  out += "json-object-" + n + " ::= \"{\" json-ws (json-string json-ws \":\" json-ws " + v + " json-ws (\",\" json-ws json-string json-ws \":\" json-ws " + v + " json-ws)*)? \"}\"\n";
  out += "json-array-" + n + " ::= \"[\" json-ws (" + v + " json-ws (\",\" json-ws " + v + " json-ws)*)? \"]\"\n";
  out += v + " ::= json-scalar";
  if (d < kMaxDepth) out += " | json-object-" + std::to_string(d + 1) + " | json-array-" + std::to_string(d + 1);
  return out + "\n";
}

}  // namespace

std::string json_rules() {
  std::string out = R"(json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" json-unicode)
json-unicode ::= [0-9a-cA-Ce-fE-F] json-hex{3} | [dD] [0-7] json-hex{2} | [dD] [89abAB] json-hex{2} "\\u" [dD] [c-fC-F] json-hex{2}
json-hex ::= [0-9a-fA-F]
json-integer ::= "-"? ("0" | [1-9] [0-9]*)
json-number ::= json-integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
json-scalar ::= json-string | json-number | "true" | "false" | "null"
)";
  out += "json-ws ::= [ \\t\\n\\r]{0," + std::to_string(kMaxWhitespace) + "}\n";
  out += "json-value-0 ::= json-scalar | json-object-1 | json-array-1\n";
  for (int d = 1; d <= kMaxDepth; ++d) out += containers_at(d);
  return out;
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> g =
      std::make_shared<const Grammar>(parse_gbnf("root ::= json-ws json-object-1\n" + json_rules()));
  return g;
}

}  // namespace kvlab::grammar

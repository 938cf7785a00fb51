// Template errors: kvlab::Error with the template line they come from.
#pragma once
#include <stdexcept>
#include <string>

#include "common/error.h"

namespace kvlab::jinja {

[[noreturn]] inline void fail_at(int line, const std::string& message) {
  throw Error("line " + std::to_string(line) + ": " + message);
}

// An error in evaluating an expression, before the evaluator adds the line
// of the expression to it (it turns it into a kvlab::Error).
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kvlab::jinja

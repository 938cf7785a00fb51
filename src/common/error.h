// The one error type of the library. Library code throws it; the edge (CLI
// main, HTTP handler) catches it and reports it once, on one line.
#pragma once
#include <stdexcept>
#include <string>

namespace kvlab {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kvlab

// The message a test expects a call to fail with.
#pragma once
#include <string>

#include "common/error.h"

namespace kvlab::test {

// The what() of the kvlab::Error that f() throws, or "(no error)".
template <class F>
std::string error_of(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace kvlab::test

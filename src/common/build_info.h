// Where this binary came from, recorded in every benchmark output.
#pragma once

namespace kvlab {
const char* build_commit();      // `git describe --always --dirty` at configure time, or "unknown"
const char* build_compiler();    // compiler id and version
}  // namespace kvlab

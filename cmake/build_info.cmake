# Writes build_info.cpp with the commit being built (`git describe --always
# --dirty`). Runs at every build, not only at configure time, so a binary
# never reports the commit its build directory was configured at; the file
# is rewritten only when its text changes, so an unchanged tree rebuilds
# nothing.
#   cmake -DSRC_DIR=... -DIN=build_info.cpp.in -DOUT=... -DCOMPILER="..." -P build_info.cmake
execute_process(COMMAND git describe --always --dirty --abbrev=10 WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE KVLAB_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT KVLAB_COMMIT)
  set(KVLAB_COMMIT unknown)
endif()
set(KVLAB_COMPILER "${COMPILER}")
configure_file(${IN} ${OUT} @ONLY)

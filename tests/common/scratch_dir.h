// A scratch directory private to the running test: its name carries the test's
// name and the process id, because ctest runs every test as its own process,
// many at once, all sharing one temporary directory. Removed at scope exit.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace kvlab::test {

struct ScratchDir {
  std::filesystem::path path;

  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "no-test";
    path = std::filesystem::temp_directory_path() / ("kvlab-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace kvlab::test

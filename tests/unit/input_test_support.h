// Shared by the unit tests that hand tpbench hostile input: a file holding given bytes for the
// test's lifetime, and the message of the InputError a call throws.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tpb/check.h"

namespace tpb::test {

// `bytes` in a file under the temporary folder (named after the process and `name`), removed
// when the object goes.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& bytes)
      : path_(std::filesystem::temp_directory_path() / ("tpb_input_test_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The message of the InputError `body` throws ("" when it throws none).
template <typename F>
std::string input_error_of(F body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tpb::test

#include "fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>

#include "tpb/check.h"

namespace fs = std::filesystem;

namespace tpb::fuzz {

void expect_only_input_errors(const std::function<void()>& body) {
  try {
    body();
  } catch (const tpb::InputError&) {
    // The documented answer to bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: finding: an exception other than tpb::InputError escaped: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: finding: a non-standard exception escaped\n");
    std::abort();
  }
}

namespace {

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tpb-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  static ScratchDir dir;
  const fs::path file = dir.path / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", file.c_str());
    std::abort();
  }
  return file.string();
}

std::pair<std::string_view, std::string_view> split_in_two(std::string_view bytes) {
  constexpr std::string_view separator = "\n----\n";
  const std::size_t at = bytes.find(separator);
  if (at == std::string_view::npos) return {bytes, bytes};
  return {bytes.substr(0, at + 1), bytes.substr(at + separator.size())};
}

}  // namespace tpb::fuzz

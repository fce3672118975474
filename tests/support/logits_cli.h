// `tpbench logits` from a test: run the binary (TPB_TPBENCH_BINARY) with arguments, capture its
// exit status and output, and read the logits file it wrote. Shared by the CPU and GPU tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "reference_engine/weights/safetensors.h"

namespace tpb::test {

struct CliRun {
  int status;          // exit status (-1: killed by a signal)
  std::string output;  // stdout + stderr
};

inline CliRun run_tpbench(const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path log = fs::temp_directory_path() / ("tpb_cli_" + std::to_string(::getpid()) + ".log");
  const std::string cmd = std::string(TPB_TPBENCH_BINARY) + " " + args + " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fs::remove(log);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

// The float32 tensor `logits` of a safetensors file; its shape in *shape when asked.
inline std::vector<float> read_logits(const std::string& path, std::vector<std::int64_t>* shape = nullptr) {
  SafetensorsFile f(path);
  const auto& info = f.info("logits");
  if (shape) *shape = info.shape;
  std::uint64_t n = 1;
  for (auto d : info.shape) n *= static_cast<std::uint64_t>(d);
  std::vector<float> v(n);
  f.read_f32("logits", 0, n, v.data());
  return v;
}

}  // namespace tpb::test

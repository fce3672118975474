// `tpbench logits --device cuda` end to end (issue 18: HF parity on a GPU is one command): the
// bf16 GPU engine's rank processes through the launcher, one GPU per rank where there are
// enough, else shared placement, compared with HF transformers' fp32 logits (tests/data/hf)
// within the numerics policy's bf16 budget, at TP 1 and 2, prefill then decode.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>

#include "reference_engine/weights/safetensors.h"
#include "suite/checks/tolerance.h"
#include "tpb/kernels/device.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status;
  std::string output;  // stdout + stderr
};

CliRun run_tpbench(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("tpb_gpu_logits_cli_" + std::to_string(::getpid()) + ".log");
  const std::string cmd = std::string(TPB_TPBENCH_BINARY) + " " + args + " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fs::remove(log);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::vector<float> read_logits(const fs::path& p) {
  SafetensorsFile f(p.string());
  std::uint64_t n = 1;
  for (auto d : f.info("logits").shape) n *= static_cast<std::uint64_t>(d);
  std::vector<float> v(n);
  f.read_f32("logits", 0, n, v.data());
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  std::string model;  // folder under tests/data/hf
  int tp;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " tp " << c.tp; }

class GpuLogitsCli : public ::testing::TestWithParam<Case> {};

TEST_P(GpuLogitsCli, MatchesTransformersWithinTheBf16Budget) {
  const Case& c = GetParam();
  if (visible_gpus().empty()) GTEST_SKIP() << "needs a GPU, none visible";
  const fs::path dir = fs::path(TPB_TEST_DATA_DIR) / "hf" / c.model;
  if (!fs::exists(dir / "reference_logits.safetensors")) GTEST_SKIP() << "no HF parity data in " << dir;
  const fs::path out = fs::temp_directory_path() / ("tpb_gpu_logits_" + std::to_string(::getpid()) + ".safetensors");
  const CliRun r = run_tpbench("logits --device cuda --model " + dir.string() + " --input-ids " +
                               (dir / "input_ids.json").string() + " --tp " + std::to_string(c.tp) +
                               " --prefill 6 --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bf16 GPU engine"), std::string::npos) << r.output;
  const std::vector<float> got = read_logits(out), want = read_logits(dir / "reference_logits.safetensors");
  fs::remove(out);
  ASSERT_EQ(got.size(), want.size());
  const double err = rel_l2(got, want);
  std::printf("[ measured ] tpbench logits --device cuda --tp %d --prefill 6 (%s) vs transformers: rel-L2 %.3g\n", c.tp,
              c.model.c_str(), err);
  EXPECT_LE(err, kTpRelL2Bf16) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuLogitsCli,
                         ::testing::Values(Case{"dsv3-grouped-bf16", 1}, Case{"dsv3-grouped-bf16", 2},
                                           Case{"k25-fused-f16", 2}, Case{"dsv3-odd-widths-bf16", 1},
                                           Case{"dsv3-odd-widths-bf16", 2}, Case{"dsv3-odd-widths-bf16", 4}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.model + "_tp" + std::to_string(i.param.tp);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tpb

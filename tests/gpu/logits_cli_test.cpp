// `tpbench logits --device cuda` end to end (issue 18: HF parity on a GPU is one command): the
// bf16 GPU engine's rank processes through the launcher, one GPU per rank where there are
// enough, else shared placement, compared with HF transformers' fp32 logits (tests/data/hf)
// within the numerics policy's bf16 budget, at TP 1, 2 and 4.
// Prefill-only runs on every model: the GPU's routing follows from one forward pass. Prefill
// then decode on the odd-width model (its padded decode path). Decode steps on the other
// models can flip a near-tie expert choice against HF's fp32 (seen on an H200: one token's
// logits off, rel-L2 8e-2, dsv3-grouped at TP 1 and k25-fused at TP 2 and 4, the rest of the
// sequence within 1e-2); GpuHfParity asserts that path in process, against the CPU engine
// pinned to the GPU's routing when a choice flipped.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <vector>

#include "suite/checks/tolerance.h"
#include "tests/support/logits_cli.h"
#include "tpb/kernels/device.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;

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
  int prefill;  // tokens prefilled, the rest decoded one by one (0: all prefilled)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " tp " << c.tp << " prefill " << c.prefill; }

class GpuLogitsCli : public ::testing::TestWithParam<Case> {};

TEST_P(GpuLogitsCli, MatchesTransformersWithinTheBf16Budget) {
  const Case& c = GetParam();
  if (visible_gpus().empty()) GTEST_SKIP() << "needs a GPU, none visible";
  const fs::path dir = fs::path(TPB_TEST_DATA_DIR) / "hf" / c.model;
  if (!fs::exists(dir / "reference_logits.safetensors")) GTEST_SKIP() << "no HF parity data in " << dir;
  const fs::path out = fs::temp_directory_path() / ("tpb_gpu_logits_" + std::to_string(::getpid()) + ".safetensors");
  const test::CliRun r = test::run_tpbench("logits --device cuda --model " + dir.string() + " --input-ids " +
                               (dir / "input_ids.json").string() + " --tp " + std::to_string(c.tp) +
                               " --prefill " + std::to_string(c.prefill) + " --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bf16 GPU engine"), std::string::npos) << r.output;
  const std::vector<float> got = test::read_logits(out.string()),
                           want = test::read_logits((dir / "reference_logits.safetensors").string());
  fs::remove(out);
  ASSERT_EQ(got.size(), want.size());
  const double err = rel_l2(got, want);
  std::printf("[ measured ] tpbench logits --device cuda --tp %d --prefill %d (%s) vs transformers: rel-L2 %.3g\n",
              c.tp, c.prefill, c.model.c_str(), err);
  EXPECT_LE(err, kTpRelL2Bf16) << r.output;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* model : {"dsv3-grouped-bf16", "k25-fused-f16", "dsv3-noqlora-f32", "dsv3-odd-widths-bf16"})
    for (int tp : {1, 2, 4}) c.push_back({model, tp, 0});
  for (int tp : {1, 2, 4}) c.push_back({"dsv3-odd-widths-bf16", tp, 6});
  return c;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuLogitsCli, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.model + "_tp" + std::to_string(i.param.tp) +
                                           (i.param.prefill > 0 ? "_decode" : "_prefill");
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tpb

// `tpbench logits` end to end: rank processes through the launcher over shm (TP 2 and 4),
// compared with HF transformers' logits; bad input exits 2 with a message naming the file.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "reference_engine/weights/safetensors.h"
#include "tests/support/logits_cli.h"
#include "tests/unit/engine_test_support.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using test::CliRun;

using test::read_logits;

CliRun run(const std::string& args) { return test::run_tpbench(args); }

class LogitsCli : public ::testing::TestWithParam<int> {};

TEST_P(LogitsCli, MultiProcessTpMatchesTransformers) {
  const int tp = GetParam();
  const fs::path dir = fs::path(TPB_TEST_DATA_DIR) / "hf" / "k25-fused-f16";
  if (!fs::exists(dir / "reference_logits.safetensors"))
    GTEST_SKIP() << "no HF parity data in " << dir << ": run tests/hf_parity/make_hf_parity.py";
  const fs::path out = fs::temp_directory_path() / ("tpb_logits_cli_" + std::to_string(::getpid()) + ".safetensors");
  const CliRun r = run("logits --model " + dir.string() + " --input-ids " + (dir / "input_ids.json").string() +
                    " --tp " + std::to_string(tp) + " --prefill 5 --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::int64_t> shape;
  const auto got = read_logits(out, &shape);
  const auto want = read_logits(dir / "reference_logits.safetensors");
  fs::remove(out);
  EXPECT_EQ(shape, (std::vector<std::int64_t>{2, 12, 256}));
  const double err = test::rel_l2(got, want);
  std::printf("[ measured ] tpbench logits --tp %d --prefill 5 vs transformers: rel-L2 %.3g\n", tp, err);
  EXPECT_LE(err, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Tp, LogitsCli, ::testing::Values(1, 2, 4), [](const auto& i) { return "tp" + std::to_string(i.param); });

TEST(LogitsCliErrors, BadInputsExitTwoNamingTheProblem) {
  const fs::path d = fs::temp_directory_path() / ("tpb_logits_cli_bad_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::ofstream(d / "ragged.json") << "[[1, 2, 3], [4, 5]]";
  std::ofstream(d / "big.json") << "[[1, 2, 99999]]";
  CliRun r = run("logits --model " + test::preset("tiny-dsv3") + " --input-ids " + (d / "ragged.json").string() + " --out " + (d / "o.st").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("$[1]"), std::string::npos) << r.output;
  r = run("logits --model " + test::preset("tiny-dsv3") + " --input-ids " + (d / "big.json").string() + " --out " + (d / "o.st").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("99999"), std::string::npos) << r.output;
  // Device, backend and placement: each refused by name before anything runs.
  std::ofstream(d / "ok.json") << "[[1, 2, 3]]";
  const std::string ok = "logits --model " + test::preset("tiny-dsv3") + " --input-ids " + (d / "ok.json").string() +
                         " --out " + (d / "o.st").string();
  r = run(ok + " --device gpu");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--device: expected cpu or cuda, got 'gpu'"), std::string::npos) << r.output;
  r = run(ok + " --tp 2 --allreduce nccl");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--allreduce: expected a cpu backend"), std::string::npos) << r.output;
  r = run(ok + " --placement shared");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--placement: places GPU ranks"), std::string::npos) << r.output;
#if !TPB_HAVE_CUDA
  r = run(ok + " --device cuda");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("built without CUDA"), std::string::npos) << r.output;
#endif
  EXPECT_FALSE(fs::exists(d / "o.st"));
  r = run("logits --model " + test::preset("tiny-dsv3") + " --input-ids " + (d / "big.json").string() + " --tp 3 --out " + (d / "o.st").string());
  EXPECT_EQ(r.status, 2) << r.output;  // 4 heads do not split over 3 ranks
  r = run("logits --model " + test::preset("tiny-dsv3") + " --out " + (d / "o.st").string());
  EXPECT_EQ(r.status, 2) << r.output;
  fs::remove_all(d);
}

TEST(LogitsCliSynthetic, PresetTp2DecodeMatchesTp1Prefill) {
  const fs::path d = fs::temp_directory_path() / ("tpb_logits_cli_syn_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::ofstream(d / "ids.json") << "[[1, 2, 3, 4, 5, 6], [200, 100, 50, 25, 12, 6]]";
  const std::string common = "logits --model " + test::preset("tiny-dsv3-grouped") + " --input-ids " + (d / "ids.json").string();
  ASSERT_EQ(run(common + " --out " + (d / "a.st").string()).status, 0);
  ASSERT_EQ(run(common + " --tp 2 --prefill 2 --out " + (d / "b.st").string()).status, 0);
  ASSERT_EQ(run(common + " --tp 4 --out " + (d / "c.st").string()).status, 0);
  ASSERT_EQ(run(common + " --tp 4 --out " + (d / "c2.st").string()).status, 0);
  const auto tp1 = read_logits(d / "a.st"), tp4 = read_logits(d / "c.st"), tp4_again = read_logits(d / "c2.st");
  const double err = test::rel_l2(read_logits(d / "b.st"), tp1);
  std::printf("[ measured ] tiny-dsv3-grouped synthetic: TP=2 prefill 2 + decode vs TP=1 prefill: rel-L2 %.3g\n", err);
  EXPECT_LE(err, 1e-5);
  const double err4 = test::rel_l2(tp4, tp1);
  std::printf("[ measured ] tiny-dsv3-grouped synthetic: TP=4 vs TP=1 prefill (shm ranks): rel-L2 %.3g\n", err4);
  EXPECT_LE(err4, 1e-5);
  ASSERT_EQ(tp4.size(), tp4_again.size());
  EXPECT_EQ(0, std::memcmp(tp4.data(), tp4_again.data(), tp4.size() * sizeof(float))) << "TP=4 run twice differs";
  fs::remove_all(d);
}

}  // namespace
}  // namespace tpb
